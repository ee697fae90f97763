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

#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
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
    "system_timer.hpp: reschedule() racing the start of the run: true means one run at the new "
    "deadline, false means the run already started at the old one (exact interleavings)") {
  for (const ClaimSide c : kClaimSides) {
    INFO(c.point);
    DrivenTimer<StashExecutor> m;
    std::vector<Nanos> ran_at;
    auto task = purgatory::make_task([&] { ran_at.push_back(m.clock.now()); });
    m.timer.add(task, 1ms);
    m.step(1ms);
    bool moved = !c.before_claim;
    RaceSchedule schedule(RaceSchedule::at_first(
        c.point, [&] { on_another_thread([&] { moved = m.timer.reschedule(*task, 5ms); }); }));
    m.executor->run_all();
    CHECK(moved == c.before_claim);
    for (int i = 0; i < 10; ++i) {
      m.step(1ms);
      m.executor->run_all();
    }
    CHECK(ran_at == std::vector<Nanos>{c.before_claim ? 6ms : 1ms});
    CHECK(m.timer.size() == 0);
  }
  // The claim lands between reschedule()'s look at the task and its taking it.
  DrivenTimer<StashExecutor> m;
  std::atomic<int> runs{0};
  auto task = purgatory::make_task([&] { runs.fetch_add(1); });
  m.timer.add(task, 1ms);
  m.step(1ms);
  Signal at_window;
  Signal claimed;
  RaceSchedule schedule(RaceSchedule::at_first("SystemTimer::schedule: state read", [&] {
    at_window.set();
    CHECK(claimed.wait());
  }));
  bool moved = true;
  std::thread rescheduler([&] { moved = m.timer.reschedule(*task, 5ms); });
  REQUIRE(at_window.wait());
  m.executor->run_all();  // claims and runs while reschedule() holds the timer's lock
  claimed.set();
  rescheduler.join();
  CHECK_FALSE(moved);
  CHECK(runs.load() == 1);
  CHECK(m.timer.size() == 0);
  CHECK_FALSE(task->is_pending());
}

TEST_CASE(
    "system_timer.hpp: reschedule() racing expiry on a 2-thread executor: one run either way, "
    "true leaves it pending for the new deadline, false means its run already started (seeded "
    "schedule, 40 "
    "rounds)") {
  std::uint64_t window_hits = 0;
  int moved_total = 0;
  for_each_seed(40, [&](std::uint64_t seed) {
    DrivenTimer<PoolExecutor> m({}, /*threads=*/2);
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 100us});
    std::atomic<int> runs{0};
    std::atomic<Nanos::rep> ran_at{-1};
    auto task = purgatory::make_task([&] {
      ran_at = m.clock.now().count();
      runs.fetch_add(1);
    });
    m.timer.add(task, 1ms);
    std::thread expirer([&] { m.step(1ms); });
    std::this_thread::sleep_for(std::chrono::microseconds(seed % 200));
    const bool moved = m.timer.reschedule(*task, 50ms);
    // true: one run, scheduled at the new deadline; false: the old run has started.
    CHECK(task->is_pending() == moved);
    expirer.join();
    for (int i = 0; i < 60; ++i)
      m.step(1ms);
    (void)spin_until([&] { return runs.load() >= 1; }, 10s);
    m.executor->shutdown();
    CHECK(runs.load() == 1);
    if (moved) CHECK(ran_at.load() >= Nanos(50ms).count());  // 50 ms after a clock at 0 or 1 ms
    moved_total += moved ? 1 : 0;
    window_hits += schedule.hits("ExpiredBatch::run_all");
  });
  CHECK(window_hits > 0);
  MESSAGE("reschedule() won " << moved_total << " of 40 races");
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
