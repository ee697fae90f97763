// SystemTimer promises that once did not hold (the longest delay, batch order, a task due at once
// at max_pending, drain()'s reason): each test fails with its fix reverted.
#include "purgatory/timer/system_timer.hpp"

#include <atomic>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::Nanos;
using purgatory::SystemTimer;
using purgatory::TimerRejected;
using namespace purgatory::test;

TEST_CASE(
    "regression: add_at(now + kMaxDelay) is accepted while the wheel's clock lags "
    "the real one") {
  ManualTimer m;
  auto distant = purgatory::make_task<CountingTask>();
  m.timer.add(distant, 1h);  // something pending: the wheel no longer catches up for free on add
  m.clock.advance(5ms);      // the clock moves, nothing expires: the wheel's time stays behind
  auto longest = purgatory::make_task<CountingTask>();
  CHECK_NOTHROW(m.timer.add_at(longest, m.clock.now() + SystemTimer::kMaxDelay));
  CHECK(longest->is_pending());
  // One nanosecond more is refused, naming the limit.
  auto beyond = purgatory::make_task<CountingTask>();
  CHECK_THROWS_AS(m.timer.add_at(beyond, m.clock.now() + SystemTimer::kMaxDelay + 1ns),
                  std::invalid_argument);
  CHECK_FALSE(beyond->is_pending());
  m.timer.close();
}

TEST_CASE(
    "regression: ExpiredBatch runs tasks of an earlier tick before those of a later "
    "tick") {
  ManualTimer m;
  std::vector<int> order;
  std::vector<purgatory::TaskRef> tasks;
  for (const int ms : {7, 3, 5, 1, 9, 2}) {
    tasks.push_back(purgatory::make_task([&order, ms] { order.push_back(ms); }));
    m.timer.add(tasks.back(), std::chrono::milliseconds(ms));
  }
  m.advance(10ms);  // all due in one expiry pass, one batch
  CHECK(order == std::vector<int>{1, 2, 3, 5, 7, 9});
}

TEST_CASE(
    "regression: drain(): a task run by the executor while drain() closes the timer "
    "is refused with Reason::draining, after drain() returned, Reason::closed") {
  // The timer's own ThreadExecutor: drain() waits for the wheel to empty, close() then lets the
  // executor finish the tasks that already expired. The first of them holds the executor until
  // the timer is closed, so the second runs (and re-adds itself) after close() began.
  ManualTimer driver_clock;  // only for its clock
  purgatory::SystemTimer timer(
      purgatory::TimerOptions{.name = "drain",
                              .clock = &driver_clock.clock,
                              .driver = purgatory::TimerOptions::Driver::external});
  std::optional<TimerRejected::Reason> reason;
  auto holder = purgatory::make_task([&] {
    for (int i = 0; i < 20000 && !timer.is_closed(); ++i)
      std::this_thread::sleep_for(100us);
  });
  purgatory::TaskRef again;
  again = purgatory::make_task([&] {
    try {
      timer.add(again, 1ms);
    } catch (const TimerRejected& e) {
      reason = e.reason();
    }
  });
  timer.add(holder, 1ms);
  timer.add(again, 1ms);
  std::thread clock_mover([&] {
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(1ms);
      driver_clock.clock.advance(1ms);
    }
  });
  const auto handed_back = timer.drain(1s);
  clock_mover.join();
  CHECK(handed_back.empty());
  REQUIRE(reason.has_value());
  CHECK(*reason == TimerRejected::Reason::draining);
  try {
    timer.add(purgatory::make_task([] {}), 1ms);
    FAIL("add after drain() must throw");
  } catch (const TimerRejected& e) {
    CHECK(e.reason() == TimerRejected::Reason::closed);
  }
  again.reset();
}
