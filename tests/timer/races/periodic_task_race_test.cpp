// timer/periodic_task.hpp's promises about concurrent runs, start() and cancel(), tested on the
// hooked timer at its named race points (seeded schedules). The rest of the header's promises:
// tests/timer/periodic_task_test.cpp.
#include "purgatory/timer/periodic_task.hpp"

#include <atomic>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "threads.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "periodic_task.hpp: runs never overlap: on a 2-thread executor, runs longer than the period "
    "(seeded schedule, 5 rounds)") {
  for_each_seed(5, [&](std::uint64_t seed) {
    DrivenTimer<PoolExecutor> m({}, /*threads=*/2);
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 100us});
    Overlap overlap;
    auto task = purgatory::make_periodic([&] {
      overlap.enter();
      std::this_thread::sleep_for(200us);  // longer than the clock thread's period
      overlap.leave();
    });
    task->start(m.timer, 0ms, 1ms, PeriodicTask::Mode::fixed_rate);
    DriverThread driver(m, /*pause=*/50us);
    (void)spin_until([&] { return task->run_count() >= 30; }, 20s);
    task->cancel();
    driver.stop();
    m.executor->shutdown();
    CHECK(task->run_count() >= 30);
    CHECK(overlap.most.load() == 1);
  });
}

TEST_CASE(
    "periodic_task.hpp: no run is ever early, even when the old schedule's run comes due while "
    "start() is restarting the task (exact interleaving)") {
  // At 9 ms start() moves the first run to 29 ms; between its lock and its add the clock reaches
  // the old schedule's 10 ms run, which the timer hands over. That run is not due under the new
  // schedule: no run_once() before 29 ms.
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] { at.push_back(m.clock.now()); });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 9ms);
  RaceSchedule schedule(
      RaceSchedule::at_first("PeriodicTask::start: unlocked, before add", [&] { m.advance(1ms); }));
  task->start(m.timer, 20ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 40ms);
  task->cancel();
  CHECK(schedule.hits("PeriodicTask::start: unlocked, before add") == 1);
  CHECK(at == std::vector<Nanos>{29ms, 39ms});
}

TEST_CASE(
    "periodic_task.hpp: runs never overlap and the schedule goes on when start() from another "
    "thread races runs on a 2-thread executor (seeded schedule, 10 rounds)") {
  std::uint64_t hits = 0;
  for_each_seed(10, [&](std::uint64_t seed) {
    DrivenTimer<PoolExecutor> m({}, /*threads=*/2);
    RaceSchedule schedule(
        {.seed = seed, .pause_probability = 0.5, .max_pause = 100us, .only = "PeriodicTask"});
    Overlap overlap;
    auto task = purgatory::make_periodic([&] {
      overlap.enter();
      std::this_thread::sleep_for(50us);
      overlap.leave();
    });
    task->start(m.timer, 0ms, 1ms, PeriodicTask::Mode::fixed_rate);
    DriverThread driver(m, /*pause=*/20us);
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 40; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      const auto mode =
          rng() % 2 == 0 ? PeriodicTask::Mode::fixed_rate : PeriodicTask::Mode::fixed_delay;
      task->start(m.timer, std::chrono::milliseconds(rng() % 3),
                  std::chrono::milliseconds(1 + rng() % 3), mode);
    }
    // The last start() left a schedule in force: it goes on.
    const std::uint64_t at_last_start = task->run_count();
    (void)spin_until([&] { return task->run_count() >= at_last_start + 3; }, 20s);
    CHECK(task->run_count() >= at_last_start + 3);
    task->cancel();
    driver.stop();
    m.executor->shutdown();
    CHECK(overlap.most.load() == 1);
    hits += schedule.hits("PeriodicTask::");
  });
  CHECK(hits > 0);
}

TEST_CASE(
    "periodic_task.hpp: cancel() from another thread during a run returns false, that run "
    "finishes and no later run happens") {
  ManualTimer m;
  std::atomic<int> finished{0};
  auto task = purgatory::make_periodic([&] { finished.fetch_add(1); });
  bool cancelled = true;
  RaceSchedule schedule(RaceSchedule::at_first("PeriodicTask::run: started, before run_once", [&] {
    on_another_thread([&] { cancelled = task->cancel(); });
  }));
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 100ms);
  CHECK_FALSE(cancelled);
  CHECK(finished.load() == 1);
  CHECK(task->run_count() == 1);
  CHECK_FALSE(task->is_pending());
}

TEST_CASE(
    "periodic_task.hpp: cancel() racing runs on a 2-thread executor: after cancel() returned, at "
    "most the run already started calls run_once(), and only when cancel() returned false "
    "(seeded schedule, 60 rounds)") {
  // Even rounds: cancel() lands, on a seeded run, in the window between the end of a run and the
  // re-add that hands the next (already due) run to the pool: no run is under way or claimed
  // there, so no run_once() may follow. Odd rounds: cancel() at a seeded moment from the test's
  // thread, where a run may be under way.
  std::uint64_t hits = 0;
  int window_cancels = 0;
  for_each_seed(60, [&](std::uint64_t round, std::uint64_t seed) {
    DrivenTimer<PoolExecutor> m({}, /*threads=*/2);
    std::atomic<int> entered{0};
    auto task = purgatory::make_periodic([&] { entered.fetch_add(1); });
    const bool in_window = round % 2 == 0;
    std::atomic<int> window_hits{0};
    std::atomic<int> at_window_cancel{-1};
    RaceSchedule::Options options{
        .seed = seed, .pause_probability = 0.5, .max_pause = 100us, .only = "Periodic"};
    if (in_window) {
      const int target = 1 + static_cast<int>(seed % 4);
      options.actions.push_back(
          {"PeriodicTask::schedule_next: unlocked, before add_at", [&, target] {
             if (window_hits.fetch_add(1) + 1 != target) return;
             m.clock.advance(2ms);  // the re-add is due at once
             on_another_thread([&] {
               (void)task->cancel();
               at_window_cancel = entered.load();
             });
           }});
    }
    RaceSchedule schedule(std::move(options));
    task->start(m.timer, 1ms, 1ms, PeriodicTask::Mode::fixed_rate);
    DriverThread driver(m);
    bool cancelled = false;
    int at_return = 0;
    if (in_window) {
      (void)spin_until([&] { return at_window_cancel.load() >= 0; }, 20s);
      REQUIRE(at_window_cancel.load() >= 0);
      at_return = at_window_cancel.load();
      ++window_cancels;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(seed % 700));
      cancelled = task->cancel();
      at_return = entered.load();
    }
    const Nanos cancelled_at = m.clock.now();
    while (m.clock.now() < cancelled_at + 20ms)
      std::this_thread::yield();
    driver.stop();
    m.executor->shutdown();
    // In the window nothing was under way: nothing may follow. Elsewhere at most the run already
    // started, and only if cancel() could not stop it.
    CHECK(entered.load() - at_return <= (in_window || cancelled ? 0 : 1));
    CHECK_FALSE(task->is_pending());
    hits += schedule.hits("PeriodicTask::");
  });
  CHECK(hits > 0);
  CHECK(window_cancels == 30);
}
