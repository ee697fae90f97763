// PeriodicTask's cancel() promises that once did not hold under a race: each test fails with its
// fix reverted, on the hooked timer's race points.
#include "purgatory/timer/periodic_task.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "threads.hpp"
#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::Nanos;
using purgatory::PeriodicTask;
using namespace purgatory::test;

TEST_CASE(
    "regression: PeriodicTask: no run_once() after cancel() returned, even when "
    "cancel() lands between a run and the re-add that hands the next run straight to the "
    "executor") {
  ManualTimer m;  // inline executor: an already-due add runs the task inside add_at()
  std::atomic<int> runs{0};
  std::atomic<bool> cancel_returned{false};
  std::atomic<int> runs_after_cancel{0};
  auto task = purgatory::make_periodic([&] {
    runs.fetch_add(1);
    if (cancel_returned.load()) runs_after_cancel.fetch_add(1);
  });
  // The window: the run finished, the next deadline is computed, the task's lock is released,
  // and the re-add has not happened yet. There the clock moves past the next deadline (so the
  // re-add hands the run to the executor at once) and another thread cancels.
  RaceSchedule schedule(
      RaceSchedule::at_first("PeriodicTask::schedule_next: unlocked, before add_at", [&] {
        m.clock.advance(10ms);
        on_another_thread([&] {
          (void)task->cancel();
          cancel_returned = true;
        });
      }));
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  m.advance(10ms);  // the first run, then the window above
  REQUIRE(cancel_returned.load());
  for (int i = 0; i < 5; ++i)
    m.advance(10ms);
  CHECK(schedule.hits("PeriodicTask::schedule_next") >= 1);
  CHECK(runs.load() == 1);
  CHECK(runs_after_cancel.load() == 0);
  CHECK_FALSE(task->is_pending());
}

TEST_CASE(
    "regression: PeriodicTask: cancel() racing a 2-thread run loop stops every "
    "future run (seeded schedule, 200 rounds)") {
  // A clock thread expires runs inline while another thread cancels at a random moment; race
  // points in start(), run() and schedule_next() pause on a seeded schedule. After cancel()
  // returned, at most the run already started may still enter run_once(), and only if cancel()
  // said false; once the clock has moved 20 periods on, nothing runs.
  for_each_seed(200, [&](std::uint64_t seed) {
    ManualTimer m;
    std::atomic<int> entered{0};
    auto task = purgatory::make_periodic([&] { entered.fetch_add(1); });
    RaceSchedule schedule(
        {.seed = seed, .pause_probability = 0.5, .max_pause = 100us, .only = "PeriodicTask"});
    task->start(m.timer, 1ms, 1ms, PeriodicTask::Mode::fixed_rate);
    std::atomic<bool> stop{false};
    std::thread clock_thread([&] {
      while (!stop.load())
        m.advance(1ms);
    });
    std::this_thread::sleep_for(std::chrono::microseconds(seed % 500));
    const bool cancelled = task->cancel();
    const int at_return = entered.load();
    const Nanos cancelled_at = m.clock.now();
    while (m.clock.now() < cancelled_at + 20ms)
      std::this_thread::yield();
    stop = true;
    clock_thread.join();
    const int later = entered.load() - at_return;
    CHECK(later <= (cancelled ? 0 : 1));
    CHECK_FALSE(task->is_pending());
  });
}
