// A small tour of SystemTimer on the real clock: schedules tasks with different delays, cancels
// some, moves one, and prints when each fires against its deadline.
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "purgatory/timer/system_timer.hpp"

using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int main() {
  purgatory::SystemTimer timer(purgatory::TimerOptions{.name = "demo"});
  const auto start = Clock::now();
  std::mutex mu;  // the executor thread prints too
  int fired = 0;
  int early = 0;
  auto say = [&](const std::string& line) {
    std::lock_guard<std::mutex> guard(mu);
    fmt::print("  t+{:7.1f} ms  {}\n", ms_since(start), line);
    std::fflush(stdout);
  };

  fmt::print(
      "purgatory timer demo: SystemTimer, tick 1 ms, 20 slots per level, reaper thread\n"
      "and executor thread on std::chrono::steady_clock.\n\n");

  struct Planned {
    std::string name;
    std::chrono::milliseconds delay;
  };
  const std::vector<Planned> plan = {{"heartbeat", 50ms},      {"fetch long-poll", 500ms},
                                     {"retry backoff", 120ms}, {"session expiry", 1500ms},
                                     {"produce ack", 30ms},    {"idle close", 800ms},
                                     {"cache refresh", 250ms}};
  std::vector<purgatory::TaskRef> tasks;
  for (const auto& p : plan) {
    const auto added = Clock::now();
    const auto deadline_ms = std::chrono::duration<double, std::milli>(p.delay).count();
    auto task = purgatory::make_task([&, name = p.name, added, deadline_ms] {
      const double waited = ms_since(added);
      say(fmt::format("FIRED   {:<16} deadline {:6.0f} ms, ran after {:7.1f} ms ({}{:.1f} ms)",
                      name, deadline_ms, waited, waited >= deadline_ms ? "late by " : "EARLY by ",
                      waited >= deadline_ms ? waited - deadline_ms : deadline_ms - waited));
      std::lock_guard<std::mutex> guard(mu);
      ++fired;
      if (waited < deadline_ms) ++early;
    });
    timer.add(task, p.delay);
    say(fmt::format("add     {:<16} delay {:5} ms", p.name, p.delay.count()));
    tasks.push_back(task);
  }

  std::this_thread::sleep_for(100ms);
  say(fmt::format("cancel  {:<16} -> {} (it will not fire)", "retry backoff", tasks[2]->cancel()));
  say(fmt::format("cancel  {:<16} -> {} (it will not fire)", "idle close", tasks[5]->cancel()));
  say(fmt::format("cancel  {:<16} -> {} (already fired: nothing to stop)", "heartbeat",
                  tasks[0]->cancel()));
  say(fmt::format("pending {} tasks; per wheel level: {}", timer.size(),
                  fmt::join(timer.size_per_level(), " ")));

  std::this_thread::sleep_for(1700ms);
  say(fmt::format("idle: {} pending; the reaper now sleeps with no wake-ups", timer.size()));
  const auto wakeups = timer.wakeups();
  std::this_thread::sleep_for(500ms);
  say(fmt::format("reaper wake-ups during the last 500 ms of idleness: {}",
                  timer.wakeups() - wakeups));
  timer.close();
  fmt::print(
      "\nsummary: {} fired, 2 cancelled, {} early (a task never fires before its deadline)\n",
      fired, early);
  return early == 0 && fired == 5 ? 0 : 1;
}
