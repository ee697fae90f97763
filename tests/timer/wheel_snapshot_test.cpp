#include "purgatory/timer/wheel_snapshot.hpp"

#include <atomic>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/system_timer.hpp"
#include "timer_test_support.hpp"

namespace purgatory::test {
namespace {

std::size_t sum(const std::vector<std::size_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::size_t{0});
}

TEST_CASE("wheel_snapshot: tasks per level and per bucket in time order, next expiration") {
  ManualTimer m(1ms, 20);  // level 0: 1 ms x 20, level 1: 20 ms x 20, level 2: 400 ms x 20
  std::vector<purgatory::Ref<CountingTask>> tasks;
  const auto add = [&](Nanos delay) {
    tasks.push_back(make_task<CountingTask>());
    m.timer.add(tasks.back(), delay);
  };
  add(5ms);
  add(5ms);
  add(5ms);
  add(7ms);
  add(110ms);
  add(110ms);
  add(1s);

  const WheelSnapshot snap = m.timer.wheel_snapshot(2);
  CHECK(snap.tasks == 7);
  CHECK(snap.wheel_time == 0ms);
  REQUIRE(snap.next_expiration.has_value());
  CHECK(*snap.next_expiration == 5ms);
  REQUIRE(snap.levels.size() == 3);
  CHECK(snap.levels[0].tick == 1ms);
  CHECK(snap.levels[0].interval == 20ms);
  CHECK(snap.levels[1].tick == 20ms);
  CHECK(snap.levels[2].tick == 400ms);
  CHECK(snap.levels[0].tasks == 4);
  CHECK(snap.levels[1].tasks == 2);
  CHECK(snap.levels[2].tasks == 1);
  REQUIRE(snap.levels[0].buckets.size() == 20);
  CHECK(snap.levels[0].buckets[5] == 3);
  CHECK(snap.levels[0].buckets[7] == 1);
  CHECK(sum(snap.levels[0].buckets) == 4);
  REQUIRE(snap.levels[1].buckets.size() == 20);
  CHECK(snap.levels[1].buckets[5] == 2);  // [100 ms, 120 ms)
  CHECK(snap.levels[2].buckets.empty());  // only 2 levels with buckets were asked for

  // The cascade: at 100 ms level 1's bucket [100, 120) comes due and its tasks fall into level 0,
  // 10 buckets ahead of the new current time.
  m.advance(100ms);
  const WheelSnapshot after = m.timer.wheel_snapshot(2);
  CHECK(after.wheel_time == 100ms);
  CHECK(after.now == 100ms);
  CHECK(after.tasks == 3);
  CHECK(after.levels[0].tasks == 2);
  CHECK(after.levels[0].buckets[10] == 2);
  CHECK(after.levels[1].tasks == 0);
  CHECK(sum(after.levels[1].buckets) == 0);
  CHECK(after.levels[1].current_time == 100ms);
  CHECK(*after.next_expiration == 110ms);
}

TEST_CASE("wheel_snapshot: bounded by max_levels_with_buckets, an empty timer has one level") {
  ManualTimer m(1ms, 512);
  const WheelSnapshot empty = m.timer.wheel_snapshot(0);
  CHECK(empty.tasks == 0);
  CHECK_FALSE(empty.next_expiration.has_value());
  REQUIRE(empty.levels.size() == 1);
  CHECK(empty.levels[0].buckets.empty());
  CHECK(m.timer.wheel_snapshot(1).levels[0].buckets.size() == 512);
  CHECK(m.timer.wheel_snapshot(-3).levels[0].buckets.empty());
}

TEST_CASE("wheel_snapshot: can be taken from a running task (no lock held while tasks run)") {
  ManualTimer m;
  std::size_t seen = 99;
  auto second = make_task<CountingTask>();
  auto first = make_task<CountingTask>([&] { seen = m.timer.wheel_snapshot().tasks; });
  m.timer.add(first, 2ms);
  m.timer.add(second, 3ms);
  m.advance(2ms);
  CHECK(first->runs == 1);
  CHECK(seen == 1);
}

// Invariant: every snapshot is one instant of the wheel: the levels add up to the total, and each
// level's buckets add up to the level, while 2 threads add and cancel and one advances the clock.
TEST_CASE("wheel_snapshot: levels and buckets add up while tasks are added, cancelled, expired") {
  ManualTimer m(1ms, 16);
  std::atomic<bool> stop{false};
  std::atomic<int> adders_done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<TaskRef> mine;
      for (int i = 0; i < 4000; ++i) {
        auto task = make_task([] {});
        m.timer.add(task, std::chrono::milliseconds(1 + rng() % 3000));
        mine.push_back(task);
        if (rng() % 2 == 0) {
          mine[rng() % mine.size()]->cancel();
        }
      }
      adders_done.fetch_add(1);
    });
  }
  std::thread clock([&] {
    while (!stop.load()) {
      m.advance(1ms);
      std::this_thread::yield();
    }
  });
  int snapshots = 0;
  int failures = 0;
  while (snapshots < 200 || adders_done.load() < 2) {
    const WheelSnapshot s = m.timer.wheel_snapshot(3);
    std::size_t levels = 0;
    for (const auto& level : s.levels) {
      levels += level.tasks;
      if (!level.buckets.empty() && sum(level.buckets) + level.ahead != level.tasks) ++failures;
    }
    if (levels != s.tasks) ++failures;
    ++snapshots;
  }
  for (auto& t : threads)
    t.join();
  stop = true;
  clock.join();
  CHECK(failures == 0);
}

}  // namespace
}  // namespace purgatory::test
