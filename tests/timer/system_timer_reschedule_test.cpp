// Contract tests for purgatory/timer/system_timer.hpp: reschedule(), alone and racing expiry.
#include "purgatory/timer/system_timer.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "threads.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "system_timer.hpp: reschedule() of a pending task moves it in place and returns true: no "
    "reference count change, one run at the new deadline") {
  DrivenTimer<StashExecutor> m;
  auto advance = [&](Nanos by) {
    m.step(by);
    m.executor->run_all();
  };
  std::vector<Nanos> ran_at;
  auto task = purgatory::make_task([&] { ran_at.push_back(m.clock.now()); });
  m.timer.add(task, 10ms);
  const auto refs = task->use_count();
  CHECK(m.timer.reschedule(*task, 4ms));  // in the wheel
  CHECK(task->use_count() == refs);
  advance(4ms);
  CHECK(ran_at == std::vector<Nanos>{4ms});
  m.timer.add(task, 1ms);
  m.step(1ms);
  REQUIRE(m.executor->held() == 1);
  CHECK(m.timer.reschedule(*task, 3ms));  // expired, not yet started
  m.executor->run_all();                  // that run is withdrawn
  CHECK(ran_at.size() == 1);
  advance(3ms);
  CHECK(ran_at == std::vector<Nanos>{4ms, 8ms});
  advance(20ms);
  CHECK(ran_at.size() == 2);
}

TEST_CASE(
    "system_timer.hpp: reschedule() returns false and schedules nothing for a task never added, "
    "cancelled, or whose run already started (it ran at the old deadline)") {
  ManualTimer m;
  auto idle = purgatory::make_task<CountingTask>();
  CHECK_FALSE(m.timer.reschedule(*idle, 1ms));
  m.timer.add(idle, 5ms);
  CHECK(idle->cancel());
  CHECK_FALSE(m.timer.reschedule(*idle, 1ms));
  bool moved = true;
  std::vector<Nanos> ran_at;
  TaskRef self;
  self = purgatory::make_task([&] {
    ran_at.push_back(m.clock.now());
    moved = m.timer.reschedule(*self, 5ms);
  });
  m.timer.add(self, 2ms);
  for (int i = 0; i < 20; ++i)
    m.advance(1ms);
  CHECK_FALSE(moved);
  CHECK(ran_at == std::vector<Nanos>{2ms});
  CHECK(m.timer.size() == 0);
  CHECK(idle->runs == 0);
}

TEST_CASE(
    "system_timer.hpp: reschedule() throws as add() does: std::invalid_argument for a bad delay "
    "or a task pending in another timer, TimerRejected when closed, or at max_pending for a task "
    "expired but not started, whatever the delay (0 included)") {
  ManualTimer m(1ms, 20, /*max_pending=*/1);
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 5ms);
  CHECK_THROWS_AS((void)m.timer.reschedule(*task, SystemTimer::kMaxDelay + 1ns),
                  std::invalid_argument);
  CHECK(task->is_pending());  // unchanged
  ManualTimer other;
  CHECK_THROWS_WITH_AS((void)other.timer.reschedule(*task, 1ms), doctest::Contains("another timer"),
                       std::invalid_argument);

  // At max_pending, a task expired but not started must re-enter the wheel: refused, and its
  // pending run is left as it was.
  DrivenTimer<StashExecutor> full({.max_pending = 1});
  auto expired = purgatory::make_task<CountingTask>();
  full.timer.add(expired, 1ms);
  full.step(1ms);
  full.timer.add(purgatory::make_task<CountingTask>(), 1h);  // the timer is full
  for (const Nanos delay : {Nanos(5ms), Nanos::zero()}) {
    try {
      (void)full.timer.reschedule(*expired, delay);
      FAIL("reschedule() into a full timer must throw");
    } catch (const TimerRejected& e) {
      CHECK(e.reason() == TimerRejected::Reason::pending_limit);
    }
    CHECK(full.timer.size() == 1);
  }
  full.executor->run_all();
  CHECK(expired->runs == 1);  // the run it had still happens

  m.timer.close();
  try {
    (void)m.timer.reschedule(*task, 1ms);
    FAIL("reschedule() after close() must throw");
  } catch (const TimerRejected& e) {
    CHECK(e.reason() == TimerRejected::Reason::closed);
  }
}
