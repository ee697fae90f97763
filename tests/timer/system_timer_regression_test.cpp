// SystemTimer promises that once did not hold (the longest delay, batch order, a task due at once
// at max_pending, drain()'s reason): each test fails with its fix reverted.
#include "purgatory/timer/system_timer.hpp"

#include <atomic>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "race_schedule.hpp"
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

TEST_CASE(
    "regression (CI, tsan): a reaper thread on a manual clock does not sleep through an advance "
    "made between its wake-up and its next look") {
  purgatory::ManualClock clock;
  std::atomic<bool> advanced{false};
  // The reaper, woken at 4 ms, goes round to look at the wheel again; the last millisecond is
  // advanced right then, before it counts the wake requests and reads the clock.
  RaceSchedule schedule({.pause_probability = 0,
                         .actions = {{"SystemTimer::advance: looking again, before counting", [&] {
                                        if (clock.now() == 4ms && !advanced.exchange(true)) {
                                          clock.advance(1ms);
                                        }
                                      }}}});
  SystemTimer timer(purgatory::TimerOptions{.clock = &clock});
  std::atomic<bool> ran{false};
  timer.add(purgatory::make_task([&] { ran = true; }), 5ms);
  clock.advance(4ms);
  for (int i = 0; i < 2000 && !ran.load(); ++i)
    std::this_thread::sleep_for(1ms);
  CHECK(advanced.load());
  CHECK(ran.load());
  CHECK(schedule.hits("SystemTimer::advance: looking again, before counting") > 0);
  timer.close();
}

TEST_CASE(
    "regression (CI, tsan): a reaper on a manual clock wakes for an advance made between its clock "
    "read and its check of the wake requests") {
  // The reaper, woken by the add, reads the clock (nothing due yet) and is about to decide to
  // sleep; the clock is advanced past the task's deadline right then. ManualClock::wait_until
  // sleeps until the next advance, so the advance must count as a wake request or the reaper
  // sleeps through it for ever.
  purgatory::ManualClock clock;
  std::atomic<SystemTimer*> watched{nullptr};
  std::atomic<bool> advanced{false};
  RaceSchedule schedule(
      {.pause_probability = 0,
       .actions = {{"SystemTimer::advance: clock read, before checking the wake requests", [&] {
                      SystemTimer* t = watched.load();
                      if (t != nullptr && t->size() == 1 && !advanced.exchange(true)) {
                        clock.advance(5ms);
                      }
                    }}}});
  SystemTimer timer(purgatory::TimerOptions{.clock = &clock});
  watched = &timer;
  std::atomic<bool> ran{false};
  timer.add(purgatory::make_task([&] { ran = true; }), 5ms);
  for (int i = 0; i < 2000 && !ran.load(); ++i)
    std::this_thread::sleep_for(1ms);
  CHECK(advanced.load());
  CHECK(ran.load());
  watched = nullptr;
  timer.close();
}

TEST_CASE(
    "regression (CI, tsan): drain(max_wait) returns when a manual clock stops exactly at its "
    "deadline, though the clock moved between drain()'s look and its wait") {
  // drain(1s) starts at 0 and takes its deadline, 1 s; the clock moves 500 ms just as drain()'s
  // wait begins; the test then stops the clock at exactly 1 s. drain() must return there, handing
  // back the task due at 2 s: its wait ends at its own deadline, not at 1 s after the wait began.
  purgatory::ManualClock clock;
  std::atomic<std::thread::id> drainer{};
  std::atomic<bool> moved{false};
  RaceSchedule schedule(
      {.pause_probability = 0,
       .actions = {{"SystemTimer::advance: entered, before the first clock read", [&] {
                      if (std::this_thread::get_id() == drainer.load() && !moved.exchange(true)) {
                        clock.advance(500ms);
                      }
                    }}}});
  SystemTimer timer(purgatory::TimerOptions{
      .name = "drain", .clock = &clock, .driver = purgatory::TimerOptions::Driver::external});
  auto later = purgatory::make_task<CountingTask>();
  timer.add(later, 2s);
  std::promise<std::vector<purgatory::TaskRef>> result;
  auto handed_back = result.get_future();
  std::thread draining([&] {
    drainer = std::this_thread::get_id();
    result.set_value(timer.drain(1s));
  });
  for (int i = 0; i < 2000 && !moved.load(); ++i)
    std::this_thread::sleep_for(1ms);
  CHECK(moved.load());
  clock.advance(500ms);  // exactly drain()'s deadline, and the clock stops there
  const bool returned = handed_back.wait_for(2s) == std::future_status::ready;
  CHECK(returned);
  if (!returned) clock.advance(10s);  // let the failed drain() finish, so the test ends
  draining.join();
  if (returned) {
    const auto back = handed_back.get();
    REQUIRE(back.size() == 1);
    CHECK(back.front().get() == later.get());
    CHECK(later->runs == 0);
  }
}
