// Tests of purgatory/timer/periodic_task.hpp: one test per promise (docs/contracts.md), with the
// regressions, each failing with its fix reverted. The tests that need the race points are in
// races/periodic_task_race_test.cpp.
#include "purgatory/timer/periodic_task.hpp"

#include <atomic>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "threads.hpp"
#include "timer_contract_support.hpp"
#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;
using purgatory::Nanos;
using purgatory::PeriodicTask;

TEST_CASE(
    "periodic_task.hpp: fixed rate: run k is due at first_deadline + k * period, whatever each "
    "run cost") {
  ManualTimer m;
  std::mt19937_64 rng(9);
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] {
    at.push_back(m.clock.now());
    m.clock.advance(std::chrono::milliseconds(rng() % 10));  // each run costs 0..9 ms
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 205ms);
  task->cancel();
  REQUIRE(at.size() == 20);
  for (std::size_t k = 0; k < at.size(); ++k)
    CHECK(at[k] == 10ms + static_cast<long>(k) * 10ms);
}

TEST_CASE(
    "periodic_task.hpp: fixed delay: each run is due one period after the previous run finished") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] {
    at.push_back(m.clock.now());
    m.clock.advance(3ms);
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_delay);
  advance_to(m, 60ms);
  task->cancel();
  CHECK(at == std::vector<Nanos>{10ms, 23ms, 36ms, 49ms});
}

TEST_CASE(
    "periodic_task.hpp: missed runs: after a stall the late run happens once, the deadlines "
    "missed are skipped, and the next is the first grid deadline after it, none is early") {
  SUBCASE("fixed rate") {
    ManualTimer m;
    std::vector<Nanos> at;
    auto task = purgatory::make_periodic([&] { at.push_back(m.clock.now()); });
    task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
    advance_to(m, 10ms);
    m.clock.advance(55ms);  // a stall: nothing expires until 65 ms
    m.driver.advance_clock(Nanos::zero());
    advance_to(m, 85ms);
    task->cancel();
    CHECK(at == std::vector<Nanos>{10ms, 65ms, 70ms, 80ms});
  }
  SUBCASE("fixed delay") {
    ManualTimer m;
    std::vector<Nanos> at;
    auto task = purgatory::make_periodic([&] { at.push_back(m.clock.now()); });
    task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_delay);
    advance_to(m, 10ms);
    m.clock.advance(55ms);
    m.driver.advance_clock(Nanos::zero());
    advance_to(m, 85ms);
    task->cancel();
    CHECK(at == std::vector<Nanos>{10ms, 65ms, 75ms, 85ms});
  }
}

TEST_CASE(
    "periodic_task.hpp: fixed rate: a run lasting exactly two periods is followed by the grid "
    "deadline at its end, not a period later") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] {
    at.push_back(m.clock.now());
    if (at.size() == 1) m.clock.advance(20ms);  // 10 ms -> 30 ms
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 45ms);
  task->cancel();
  // "the next run is due at the first deadline of the fixed-rate grid at or after the end of
  // the late run": 30 ms.
  CHECK(at == std::vector<Nanos>{10ms, 30ms, 40ms});
}

TEST_CASE(
    "periodic_task.hpp: runs never overlap, even when start() is called from the task's own run "
    "with a first run due at once: the new schedule's first run follows the end of that run") {
  ManualTimer m;  // inline executor: a run due at once would run inside the current one
  Overlap overlap;
  purgatory::Ref<PeriodicTask> task;
  std::vector<Nanos> at;
  bool pending_after_start = true;
  task = purgatory::make_periodic([&] {
    overlap.enter();
    at.push_back(m.clock.now());
    if (at.size() == 1) {
      task->start(m.timer, 0ms, 10ms, PeriodicTask::Mode::fixed_rate);
      pending_after_start = task->is_pending();
    }
    overlap.leave();
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 50ms);
  task->cancel();
  CHECK(overlap.most.load() == 1);
  CHECK_FALSE(pending_after_start);  // "is_pending() is false until then"
  // The restart's first run at once (10 ms) after the run that called start(), then its grid.
  CHECK(at == std::vector<Nanos>{10ms, 10ms, 20ms, 30ms, 40ms, 50ms});
}

TEST_CASE(
    "periodic_task.hpp: start() from the task's own run with a later first deadline: the new "
    "schedule's first run is at that deadline, then one every period") {
  ManualTimer m;
  purgatory::Ref<PeriodicTask> task;
  std::vector<Nanos> at;
  task = purgatory::make_periodic([&] {
    at.push_back(m.clock.now());
    if (at.size() == 1) task->start(m.timer, 25ms, 5ms, PeriodicTask::Mode::fixed_rate);
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 45ms);
  task->cancel();
  CHECK(at == std::vector<Nanos>{10ms, 35ms, 40ms, 45ms});
}

TEST_CASE(
    "periodic_task.hpp: runs never overlap, even when another thread restarts the task during a "
    "run (2-thread executor): the new schedule's first run follows the end of that run") {
  DrivenTimer<PoolExecutor> m({}, /*threads=*/2);
  Overlap overlap;
  Signal in_first;
  Signal restarted;
  std::atomic<int> runs{0};
  std::atomic<bool> first_over{false};
  std::atomic<bool> second_after_first{false};
  auto task = purgatory::make_periodic([&] {
    overlap.enter();
    if (runs.fetch_add(1) == 0) {
      in_first.set();
      CHECK(restarted.wait());
      // Give a second run every chance to start now if it is going to.
      std::this_thread::sleep_for(100ms);
      first_over = true;
    } else if (runs.load() == 2) {
      second_after_first = first_over.load();
    }
    overlap.leave();
  });
  task->start(m.timer, 1ms, 10ms, PeriodicTask::Mode::fixed_rate);
  m.step(1ms);
  REQUIRE(in_first.wait());
  task->start(m.timer, 0ms, 10ms, PeriodicTask::Mode::fixed_rate);  // restart, due at once
  CHECK_FALSE(task->is_pending());  // scheduled by the run in progress, when it ends
  restarted.set();
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (runs.load() < 2 && std::chrono::steady_clock::now() < give_up) {
    (void)m.driver.advance_clock(Nanos::zero());  // the driver: takes the restart once it is due
    std::this_thread::yield();
  }
  task->cancel();
  m.executor->shutdown();
  CHECK(overlap.most.load() == 1);
  CHECK(runs.load() == 2);  // the restart's first run, at once after the first ended; no other
  CHECK(second_after_first.load());
}

TEST_CASE(
    "periodic_task.hpp: start() during a run on a timer closed before the run ends: the run's "
    "add is refused, the schedule ends, and nothing is reported as a task error") {
  std::atomic<int> errors{0};
  DrivenTimer<PoolExecutor> m({.on_task_error = [&](const purgatory::TimerTask&,
                                                    std::exception_ptr) { errors.fetch_add(1); }},
                              /*threads=*/2);
  Signal in_run;
  Signal go;
  std::atomic<int> runs{0};
  auto task = purgatory::make_periodic([&] {
    if (runs.fetch_add(1) == 0) {
      in_run.set();
      CHECK(go.wait());
    }
  });
  task->start(m.timer, 1ms, 10ms, PeriodicTask::Mode::fixed_rate);
  m.step(1ms);
  REQUIRE(in_run.wait());
  CHECK_NOTHROW(task->start(m.timer, 0ms, 10ms, PeriodicTask::Mode::fixed_rate));  // recorded
  CHECK(m.timer.close().empty());
  go.set();
  m.executor->shutdown();  // the run has ended
  CHECK(runs.load() == 1);
  CHECK(task->run_count() == 1);
  CHECK_FALSE(task->is_pending());
  CHECK(errors.load() == 0);
}

TEST_CASE(
    "periodic_task.hpp: cancel() between runs returns true, run_once() is not called after "
    "cancel() returned") {
  ManualTimer m;
  auto task = purgatory::make_periodic([] {});
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 25ms);
  CHECK(task->run_count() == 2);
  CHECK(task->cancel());
  CHECK_FALSE(task->is_pending());
  advance_to(m, 100ms);
  CHECK(task->run_count() == 2);
}

TEST_CASE(
    "periodic_task.hpp: cancel() from inside the task's own run is safe: that run finishes, no "
    "later one starts") {
  ManualTimer m;
  purgatory::Ref<PeriodicTask> task;
  int runs = 0;
  task = purgatory::make_periodic([&] {
    if (++runs == 3) (void)task->cancel();
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_delay);
  advance_to(m, 100ms);
  CHECK(runs == 3);
  CHECK(task->run_count() == 3);
  CHECK_FALSE(task->is_pending());
}

TEST_CASE(
    "periodic_task.hpp: start() throws std::invalid_argument naming a period <= 0, and "
    "TimerRejected on a closed timer, nothing is scheduled") {
  ManualTimer m;
  auto task = purgatory::make_periodic([] {});
  CHECK_THROWS_WITH_AS(task->start(m.timer, 0ms, 0ms, PeriodicTask::Mode::fixed_rate),
                       doctest::Contains("0 ns"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(task->start(m.timer, 0ms, -5ns, PeriodicTask::Mode::fixed_delay),
                       doctest::Contains("-5"), std::invalid_argument);
  CHECK_FALSE(task->is_pending());
  m.timer.close();
  CHECK_THROWS_AS(task->start(m.timer, 1ms, 1ms, PeriodicTask::Mode::fixed_rate), TimerRejected);
  CHECK_FALSE(task->is_pending());
  CHECK(task->run_count() == 0);
}

TEST_CASE(
    "periodic_task.hpp: start() throws what add() throws for an initial delay above kMaxDelay, "
    "Nanos::max() included, and runs nothing") {
  ManualTimer m;
  auto task = purgatory::make_periodic([] {});
  CHECK_THROWS_AS(
      task->start(m.timer, SystemTimer::kMaxDelay + 1ms, 1ms, PeriodicTask::Mode::fixed_rate),
      std::invalid_argument);
  CHECK_FALSE(task->is_pending());
  CHECK(task->run_count() == 0);
}

TEST_CASE(
    "periodic_task.hpp: start() with an initial delay of Nanos::max() throws "
    "std::invalid_argument naming it, as add() does, and runs nothing") {
  ManualTimer m;
  m.advance(1ms);  // any clock but 0
  auto task = purgatory::make_periodic([] {});
  CHECK_THROWS_WITH_AS(task->start(m.timer, Nanos::max(), 1ms, PeriodicTask::Mode::fixed_rate),
                       doctest::Contains("9223372036854775807 ns"), std::invalid_argument);
  CHECK_FALSE(task->is_pending());
  advance_to(m, 10ms);
  CHECK(task->run_count() == 0);
}

TEST_CASE(
    "periodic_task.hpp: start() with an initial delay whose deadline overflows the clock throws "
    "std::invalid_argument naming it, and runs nothing") {
  ManualClock clock(Nanos::max() - 1h);
  SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>()));
  auto task = purgatory::make_periodic([] {});
  CHECK_THROWS_WITH_AS(task->start(timer, 2h, 1ms, PeriodicTask::Mode::fixed_rate),
                       doctest::Contains("7200000000000 ns"), std::invalid_argument);
  CHECK_FALSE(task->is_pending());
  CHECK(task->run_count() == 0);
}

TEST_CASE(
    "periodic_task.hpp: start() with a period above kMaxDelay throws std::invalid_argument "
    "naming it, as add() does for that delay, and accepts kMaxDelay itself") {
  ManualTimer m;
  auto task = purgatory::make_periodic([] {});
  CHECK_THROWS_WITH_AS(
      task->start(m.timer, 1ms, SystemTimer::kMaxDelay + 1ms, PeriodicTask::Mode::fixed_rate),
      doctest::Contains("3153600000001000000 ns"), std::invalid_argument);
  CHECK_FALSE(task->is_pending());
  advance_to(m, 5ms);
  CHECK(task->run_count() == 0);
  // The longest period add() accepts: the first run happens and the next one is scheduled.
  task->start(m.timer, 1ms, SystemTimer::kMaxDelay, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 10ms);
  CHECK(task->run_count() == 1);
  CHECK(task->is_pending());
  CHECK(task->cancel());
}

TEST_CASE(
    "periodic_task.hpp: a start() refused for a bad value leaves a scheduled task as it was") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] { at.push_back(m.clock.now()); });
  task->start(m.timer, 5ms, 5ms, PeriodicTask::Mode::fixed_rate);
  CHECK_THROWS_AS(
      task->start(m.timer, 1ms, SystemTimer::kMaxDelay + 1ns, PeriodicTask::Mode::fixed_delay),
      std::invalid_argument);
  CHECK_THROWS_AS(task->start(m.timer, Nanos::max(), 1ms, PeriodicTask::Mode::fixed_delay),
                  std::invalid_argument);
  advance_to(m, 12ms);
  CHECK(at == std::vector<Nanos>{5ms, 10ms});
  CHECK(task->cancel());
}

TEST_CASE(
    "periodic_task.hpp: start() of a scheduled task restarts it with the new schedule, start() "
    "after cancel() starts it again") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] { at.push_back(m.clock.now()); });
  task->start(m.timer, 100ms, 100ms, PeriodicTask::Mode::fixed_rate);
  task->start(m.timer, 5ms, 5ms, PeriodicTask::Mode::fixed_rate);  // restart
  advance_to(m, 12ms);
  CHECK(at == std::vector<Nanos>{5ms, 10ms});
  CHECK(task->cancel());
  advance_to(m, 30ms);
  CHECK(at.size() == 2);
  task->start(m.timer, 1ms, 7ms, PeriodicTask::Mode::fixed_delay);
  advance_to(m, 40ms);
  CHECK(at == std::vector<Nanos>{5ms, 10ms, 31ms, 38ms});
  task->cancel();
}

TEST_CASE(
    "periodic_task.hpp: an initial delay <= 0 runs the first run at the driver's next pass, not "
    "inside start()") {
  ManualTimer m;  // inline executor: what runs, runs on the thread that advances
  auto task = purgatory::make_periodic([] {});
  task->start(m.timer, 0ms, 10ms, PeriodicTask::Mode::fixed_rate);
  auto negative = purgatory::make_periodic([] {});
  negative->start(m.timer, -3ms, 10ms, PeriodicTask::Mode::fixed_delay);
  CHECK(task->run_count() == 0);
  CHECK(negative->run_count() == 0);
  m.advance(0ms);  // the clock has not moved
  CHECK(task->run_count() == 1);
  CHECK(negative->run_count() == 1);
  advance_to(m, 10ms);
  CHECK(task->run_count() == 2);
  CHECK(negative->run_count() == 2);
  task->cancel();
  negative->cancel();
}

TEST_CASE(
    "periodic_task.hpp: run_count() counts the runs so far, an exception from run_once() is "
    "reported by the timer and the schedule goes on") {
  std::atomic<int> reported{0};
  DrivenTimer<InlineExecutor> m(
      {.on_task_error = [&](const purgatory::TimerTask&, std::exception_ptr) {
        reported.fetch_add(1);
      }});
  int calls = 0;
  auto task = purgatory::make_periodic([&] {
    if (++calls % 2 == 1) throw std::runtime_error("odd run");
  });
  task->start(m.timer, 1ms, 1ms, PeriodicTask::Mode::fixed_rate);
  for (int i = 0; i < 6; ++i)
    m.step(1ms);
  CHECK(calls == 6);
  CHECK(task->run_count() == 6);
  CHECK(reported.load() == 3);
  task->cancel();
}

TEST_CASE("PeriodicTask fixed rate 10 ms: 1000 runs in 10 s, the k-th exactly at k*10 ms") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] { at.push_back(m.clock.now()); });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 10s);
  REQUIRE(at.size() == 1000);
  int off = 0;
  for (std::size_t k = 0; k < at.size(); ++k) {
    const Nanos due = std::chrono::milliseconds(10 * (k + 1));
    if (at[k] < due || at[k] >= due + 1ms) ++off;  // never early, within one tick
  }
  CHECK(off == 0);
  CHECK(task->run_count() == 1000);
  CHECK(task->cancel());
}

TEST_CASE("PeriodicTask fixed delay 10 ms with a run taking 3 ms runs every 13 ms") {
  ManualTimer m;
  std::vector<Nanos> started;
  auto task = purgatory::make_periodic([&] {
    started.push_back(m.clock.now());
    m.clock.advance(3ms);  // simulated work
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_delay);
  advance_to(m, 200ms);
  REQUIRE(started.size() >= 10);
  CHECK(started[0] == 10ms);
  for (std::size_t i = 1; i < started.size(); ++i)
    CHECK(started[i] - started[i - 1] == 13ms);
  task->cancel();
}

TEST_CASE("PeriodicTask fixed rate after a 55 ms stall: one late run, missed deadlines skipped") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] { at.push_back(m.clock.now()); });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 20ms);
  m.advance(55ms);  // the process stalls from 20 ms to 75 ms: 30..70 ms were missed
  advance_to(m, 100ms);
  CHECK(at == std::vector<Nanos>{10ms, 20ms, 75ms, 80ms, 90ms, 100ms});
  task->cancel();
}

TEST_CASE("PeriodicTask fixed delay after a 55 ms stall: runs once, then period after it") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] { at.push_back(m.clock.now()); });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_delay);
  advance_to(m, 20ms);
  m.advance(55ms);
  advance_to(m, 100ms);
  CHECK(at == std::vector<Nanos>{10ms, 20ms, 75ms, 85ms, 95ms});
  task->cancel();
}

TEST_CASE("PeriodicTask: cancel from inside its own 3rd run stops it after that run") {
  ManualTimer m;
  purgatory::Ref<PeriodicTask> task;
  bool cancel_result = true;
  task = purgatory::make_periodic([&] {
    if (task->run_count() == 2) cancel_result = task->cancel();  // 3rd run (count is before it)
  });
  task->start(m.timer, 5ms, 5ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 1s);
  CHECK(task->run_count() == 3);
  CHECK_FALSE(cancel_result);  // a run was going: nothing pending to stop, but no more runs
  CHECK(m.timer.size() == 0);
  CHECK_FALSE(task->is_pending());
}

TEST_CASE("PeriodicTask: cancel between runs returns true and stops all future runs") {
  ManualTimer m;
  auto task = purgatory::make_periodic([] {});
  task->start(m.timer, 0ms, 10ms, PeriodicTask::Mode::fixed_rate);
  m.advance(0ms);
  CHECK(task->run_count() == 1);  // initial delay 0: ran at the first pass
  advance_to(m, 25ms);
  CHECK(task->run_count() == 3);
  CHECK(task->cancel());
  advance_to(m, 1s);
  CHECK(task->run_count() == 3);
  // It can be started again.
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_delay);
  advance_to(m, 1s + 30ms);
  CHECK(task->run_count() == 6);
  task->cancel();
}

TEST_CASE("PeriodicTask: a period of zero or less is rejected") {
  ManualTimer m;
  auto task = purgatory::make_periodic([] {});
  CHECK_THROWS_WITH_AS(task->start(m.timer, 1ms, 0ms, PeriodicTask::Mode::fixed_rate),
                       doctest::Contains("period must be > 0 ns, got 0 ns"), std::invalid_argument);
  CHECK_FALSE(task->is_pending());
}

TEST_CASE("PeriodicTask: runs never overlap, even when a run is longer than the period") {
  purgatory::SystemTimer timer;  // real clock, executor thread
  std::atomic<int> in_run{0};
  std::atomic<int> overlaps{0};
  Latch latch(10);
  auto task = purgatory::make_periodic([&] {
    if (in_run.fetch_add(1) != 0) overlaps.fetch_add(1);
    std::this_thread::sleep_for(3ms);  // longer than the 1 ms period
    in_run.fetch_sub(1);
    latch.count_down();
  });
  task->start(timer, 1ms, 1ms, PeriodicTask::Mode::fixed_rate);
  REQUIRE(latch.wait_for(30s));
  task->cancel();
  timer.close();
  CHECK(overlaps.load() == 0);
}

TEST_CASE("PeriodicTask: an exception from a run is reported and the schedule goes on") {
  ManualTimer m;
  auto task = purgatory::make_periodic([] { throw std::runtime_error("periodic boom"); });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  advance_to(m, 50ms);
  CHECK(task->run_count() == 5);
  task->cancel();
}

TEST_CASE(
    "regression: PeriodicTask fixed rate: a run lasting exactly one period is "
    "followed by the run due at first_deadline + k * period, not a period later") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] {
    at.push_back(m.clock.now());
    if (at.size() == 1) m.clock.advance(10ms);  // the first run lasts exactly one period
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  while (m.clock.now() < 40ms)
    m.advance(1ms);
  CHECK(at == std::vector<Nanos>{10ms, 20ms, 30ms, 40ms});
  task->cancel();
}
