#include "purgatory/timer/system_timer.hpp"

#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/periodic_task.hpp"
#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::Nanos;
using purgatory::TimerRejected;
using namespace purgatory::test;

namespace {

// Waits (bounded) until the timer refuses new tasks because a drain started.
bool wait_until_draining(purgatory::SystemTimer& timer) {
  auto probe = purgatory::make_task<CountingTask>();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      timer.add(probe, 1h);
      probe->cancel();
    } catch (const TimerRejected& e) {
      return e.reason() == TimerRejected::Reason::draining;
    }
    std::this_thread::yield();
  }
  return false;
}

}  // namespace

TEST_CASE("SystemTimer::drain: 10,000 tasks over 2 s all run once, adds are refused, it stops") {
  ManualTimer m;
  std::vector<purgatory::Ref<CountingTask>> tasks;
  std::mt19937 rng(11);
  for (int i = 0; i < 10'000; ++i) {
    tasks.push_back(purgatory::make_task<CountingTask>());
    m.timer.add(tasks.back(), std::chrono::microseconds(1 + rng() % 2'000'000));
  }
  auto beat = purgatory::make_periodic([] {});
  beat->start(m.timer, 1ms, 1ms, purgatory::PeriodicTask::Mode::fixed_rate);

  std::vector<purgatory::TaskRef> handed_back;
  std::thread drainer([&] { handed_back = m.timer.drain(); });
  REQUIRE(wait_until_draining(m.timer));
  // Periodic tasks are cancelled as the drain starts (just after it begins refusing adds).
  const auto cancel_deadline = std::chrono::steady_clock::now() + 30s;
  while (beat->is_pending() && std::chrono::steady_clock::now() < cancel_deadline) {
    std::this_thread::yield();
  }
  CHECK_FALSE(beat->is_pending());
  int refused = 0;
  while (m.clock.now() < 2001ms) {
    m.clock.advance(1ms);  // the drainer expires the tasks itself
    try {
      m.timer.add(purgatory::make_task<CountingTask>(), 1ms);
    } catch (const TimerRejected&) {
      ++refused;
    }
  }
  drainer.join();
  CHECK(handed_back.empty());
  CHECK(refused == 2001);
  CHECK(m.timer.is_closed());
  int wrong = 0;
  for (const auto& t : tasks)
    wrong += t->runs.load() == 1 ? 0 : 1;
  CHECK(wrong == 0);
  CHECK(beat->run_count() == 0);
}

TEST_CASE("SystemTimer::drain with a 1 s deadline hands back the 10 tasks not yet due") {
  ManualTimer m;
  std::vector<purgatory::Ref<CountingTask>> tasks;
  for (int i = 1; i <= 20; ++i) {
    tasks.push_back(purgatory::make_task<CountingTask>());
    m.timer.add(tasks.back(), std::chrono::milliseconds(100 * i));  // 100 ms .. 2 s
  }
  std::vector<purgatory::TaskRef> handed_back;
  std::thread drainer([&] { handed_back = m.timer.drain(1s); });
  REQUIRE(wait_until_draining(m.timer));
  while (m.clock.now() < 1s)
    m.clock.advance(1ms);
  drainer.join();
  CHECK(handed_back.size() == 10);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const bool due = i < 10;  // tasks[9] is due at exactly 1 s
    CHECK(tasks[i]->runs.load() == (due ? 1 : 0));
    CHECK_FALSE(tasks[i]->is_pending());
  }
}

TEST_CASE("SystemTimer::drain on the real clock with the reaper waits for the last task") {
  purgatory::SystemTimer timer;
  auto task = purgatory::make_task<CountingTask>();
  const auto start = std::chrono::steady_clock::now();
  timer.add(task, 50ms);
  CHECK(timer.drain(10s).empty());
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
  CHECK(task->runs.load() == 1);
}
