// The timer in one page: a task that runs after 200 ms, and one cancelled before its turn.
#include <chrono>
#include <cstdio>

#include <purgatory/timer/system_timer.hpp>

int main() {
  using namespace std::chrono_literals;
  purgatory::SystemTimer timer;  // a reaper thread and an executor thread, 1 ms tick

  auto flush = purgatory::make_task([] { std::puts("flushed after 200 ms"); });
  auto retry = purgatory::make_task([] { std::puts("never printed"); });
  timer.add(flush, 200ms);
  timer.add(retry, 50ms);
  timer.add(retry, 500ms);                          // adding again moves it: it runs once
  std::printf("cancelled: %d\n", retry->cancel());  // 1: it will not run
  timer.drain();  // waits until every pending task has run, then stops the threads
}
