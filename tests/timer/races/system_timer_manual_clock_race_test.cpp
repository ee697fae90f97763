// SystemTimer's reaper and drain() on a manual clock: promises that once did not hold under a
// race (seen in CI under TSan), each failing with its fix reverted, on the hooked timer.
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
