#include "purgatory/timer/periodic_task.hpp"

#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::Nanos;
using purgatory::PeriodicTask;
using namespace purgatory::test;

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
