// timer/system_timer.hpp: reschedule() racing the start of a run and expiry, on the hooked timer
// at its named race points.
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
