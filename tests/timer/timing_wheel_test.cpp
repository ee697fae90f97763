// Tests of the timing wheel (timer/src/timing_wheel.hpp, internal to the library): one test per
// promise (docs/contracts.md).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include <doctest/doctest.h>

#include "timer_contract_support.hpp"
#include "timing_wheel.hpp"

using purgatory::TaskRef;
using purgatory::TimerTask;
using purgatory::detail::TimerTaskList;
using purgatory::detail::TimingWheel;
using purgatory::test::make_counting_tasks;

namespace {

// Drives `wheel` to `until` the way SystemTimer does: expire the earliest bucket, re-add its
// tasks; a task the wheel refuses is due: record the wheel time at which that happened.
void drive(TimingWheel& wheel, std::int64_t until, std::map<const TimerTask*, std::int64_t>& due,
           std::map<const TimerTask*, int>& times_due) {
  while (wheel.expire_next(until, [&](TimerTask& t) {
    if (!wheel.add(t, TimingWheel::expiration_of(t))) {
      due[&t] = wheel.current_time();
      ++times_due[&t];
    }
  })) {
  }
}

}  // namespace

TEST_CASE(
    "timing_wheel.hpp: the constructor throws std::invalid_argument naming a tick <= 0, a "
    "wheel_size outside [2, kMaxWheelSize] or a start_time < 0") {
  CHECK_THROWS_WITH_AS(TimingWheel(0, 20, 0), doctest::Contains("0"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(TimingWheel(-7, 20, 0), doctest::Contains("-7"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(TimingWheel(1, 1, 0), doctest::Contains("1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(TimingWheel(1, TimingWheel::kMaxWheelSize + 1, 0),
                       doctest::Contains("65537"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(TimingWheel(1, 20, -5), doctest::Contains("-5"), std::invalid_argument);
  CHECK_NOTHROW(TimingWheel(1, 2, 0));
  CHECK_NOTHROW(TimingWheel(1, TimingWheel::kMaxWheelSize, 0));
}

TEST_CASE(
    "timing_wheel.hpp: add() returns false and leaves the task untouched when expiration < "
    "current_time() + tick(), true when it places it") {
  TimingWheel wheel(10, 8, 1000);
  auto tasks = make_counting_tasks(2);
  CHECK_FALSE(wheel.add(*tasks[0], 1009));
  CHECK(wheel.size() == 0);
  CHECK_FALSE(wheel.next_expiration().has_value());
  TimerTaskList elsewhere;  // untouched: it can be linked anywhere
  elsewhere.add(*tasks[0]);
  CHECK(elsewhere.size() == 1);
  elsewhere.flush([](TimerTask&) {});
  CHECK(wheel.add(*tasks[1], 1010));
  CHECK(wheel.size() == 1);
  wheel.drain([](TimerTask&) {});
}

TEST_CASE("timing_wheel.hpp: a task is placed in the bucket that starts at or before it") {
  TimingWheel wheel(10, 8, 1000);
  auto tasks = make_counting_tasks(3);
  REQUIRE(wheel.add(*tasks[0], 1015));
  CHECK(wheel.next_expiration() == 1010);
  CHECK(TimingWheel::expiration_of(*tasks[0]) == 1015);
  REQUIRE(wheel.add(*tasks[1], 1234));  // past this level's interval (80): an overflow level
  wheel.remove(*tasks[0]);
  CHECK(wheel.next_expiration() <= 1234);
  CHECK(wheel.next_expiration() > 1234 - wheel.interval());
  wheel.drain([](TimerTask&) {});
}

TEST_CASE(
    "timing_wheel.hpp: overflow wheels are created on first use, each with a tick equal to the "
    "interval below, short timeouts need one level") {
  TimingWheel wheel(1, 20, 0);
  auto tasks = make_counting_tasks(3);
  REQUIRE(wheel.add(*tasks[0], 19));
  CHECK(wheel.levels() == 1);
  CHECK(wheel.overflow_wheel() == nullptr);
  CHECK(wheel.interval() == 20);
  REQUIRE(wheel.add(*tasks[1], 25));
  CHECK(wheel.levels() == 2);
  REQUIRE(wheel.overflow_wheel() != nullptr);
  CHECK(wheel.overflow_wheel()->tick() == wheel.interval());
  REQUIRE(wheel.add(*tasks[2], 1000));
  CHECK(wheel.levels() == 3);
  CHECK(wheel.overflow_wheel()->overflow_wheel()->tick() == wheel.overflow_wheel()->interval());
  CHECK(wheel.level_size() == 1);
  CHECK(wheel.overflow_wheel()->level_size() == 1);
  CHECK(wheel.size() == 3);
  wheel.drain([](TimerTask&) {});
}

TEST_CASE(
    "timing_wheel.hpp: remove() unlinks a task from any level: it never expires, and the sizes "
    "and next_expiration() follow") {
  TimingWheel wheel(1, 20, 0);
  auto tasks = make_counting_tasks(2);
  REQUIRE(wheel.add(*tasks[0], 5));
  REQUIRE(wheel.add(*tasks[1], 300));
  TimingWheel::remove(*tasks[0]);
  CHECK(wheel.size() == 1);
  CHECK(wheel.level_size() == 0);
  CHECK(wheel.next_expiration() > 5);
  TimingWheel::remove(*tasks[1]);
  CHECK(wheel.size() == 0);
  CHECK_FALSE(wheel.next_expiration().has_value());
  int expired = 0;
  CHECK_FALSE(wheel.expire_next(10'000, [&](TimerTask&) { ++expired; }));
  CHECK(expired == 0);
}

TEST_CASE(
    "timing_wheel.hpp: advance_clock(time) moves every level's current time to that time, rounded "
    "down "
    "to that level's tick") {
  TimingWheel wheel(10, 4, 0);
  auto tasks = make_counting_tasks(1);
  REQUIRE(wheel.add(*tasks[0], 1000));  // levels of tick 10, 40, 160, 640
  REQUIRE(wheel.levels() == 4);
  wheel.advance_clock(657);
  const TimingWheel* w = &wheel;
  for (const std::int64_t expected : {650, 640, 640, 640}) {
    REQUIRE(w != nullptr);
    CHECK(w->current_time() == expected);
    w = w->overflow_wheel();
  }
  wheel.drain([](TimerTask&) {});
}

TEST_CASE(
    "timing_wheel.hpp: next_expiration() is the earliest non-empty bucket over all levels, none "
    "when nothing is held") {
  TimingWheel wheel(1, 8, 0);
  CHECK_FALSE(wheel.next_expiration().has_value());
  auto tasks = make_counting_tasks(3);
  REQUIRE(wheel.add(*tasks[0], 100));
  REQUIRE(wheel.add(*tasks[1], 6));
  REQUIRE(wheel.add(*tasks[2], 40));
  CHECK(wheel.next_expiration() == 6);
  TimingWheel::remove(*tasks[1]);
  const auto next = wheel.next_expiration();
  REQUIRE(next.has_value());
  CHECK(*next <= 40);
  CHECK(*next > 8);  // a bucket of a coarser level, starting at or before 40
  wheel.drain([](TimerTask&) {});
  CHECK_FALSE(wheel.next_expiration().has_value());
}

TEST_CASE(
    "timing_wheel.hpp: expire_next() expires the earliest bucket only when due by the time given, "
    "advancing the clock to it, re-adding cascades each task down until it is due at its own "
    "tick (500 random tasks, 3 levels and more)") {
  TimingWheel wheel(1, 8, 0);
  std::mt19937_64 rng(3);
  auto tasks = make_counting_tasks(500);
  std::map<const TimerTask*, std::int64_t> expiration;
  for (auto& t : tasks) {
    const auto e = static_cast<std::int64_t>(1 + rng() % 3000);
    REQUIRE(wheel.add(*t, e));
    expiration[t.get()] = e;
  }
  CHECK(wheel.levels() >= 3);
  // Nothing is due at 0: false, and the clock does not move.
  CHECK_FALSE(wheel.expire_next(0, [](TimerTask&) { FAIL("nothing is due"); }));
  CHECK(wheel.current_time() == 0);
  std::map<const TimerTask*, std::int64_t> due;
  std::map<const TimerTask*, int> times_due;
  for (std::int64_t until = 0; until < 3000; until += 97)
    drive(wheel, until, due, times_due);
  drive(wheel, 3000, due, times_due);
  CHECK(wheel.size() == 0);
  REQUIRE(due.size() == 500);
  for (const auto& [task, at] : due) {
    CHECK(times_due[task] == 1);
    CHECK(at == expiration[task]);  // tick 1: due exactly at its expiration, never earlier
  }
}

TEST_CASE(
    "timing_wheel.hpp: expire_due() takes every task due by the time given, bucket after bucket in "
    "time "
    "order, fn returning false stops early and the rest waits for the next call") {
  TimingWheel wheel(1, 8, 0);
  auto tasks = make_counting_tasks(30);
  std::map<const TimerTask*, std::int64_t> expiration;
  for (int i = 0; i < 30; ++i) {
    const std::int64_t e = 1 + (i * 7) % 50;  // some share a bucket, some cascade
    REQUIRE(wheel.add(*tasks[i], e));
    expiration[tasks[i].get()] = e;
  }
  std::vector<std::int64_t> order;
  int calls = 0;
  // Stop after 5 tasks: returns false, the rest stays.
  const bool all = wheel.expire_due(30, [&](TimerTask& t) {
    if (!wheel.add(t, TimingWheel::expiration_of(t))) order.push_back(expiration[&t]);
    return ++calls < 5;
  });
  CHECK_FALSE(all);
  CHECK(wheel.size() + order.size() == 30);
  while (!wheel.expire_due(30, [&](TimerTask& t) {
    if (!wheel.add(t, TimingWheel::expiration_of(t))) order.push_back(expiration[&t]);
    return true;
  })) {
  }
  CHECK(wheel.current_time() == 30);  // everything due was taken: the clock is at `time`
  std::size_t due_by_30 = 0;
  for (const auto& [task, e] : expiration)
    due_by_30 += e <= 30 ? 1 : 0;
  CHECK(order.size() == due_by_30);
  CHECK(std::is_sorted(order.begin(), order.end()));  // bucket after bucket, in time order
  CHECK(wheel.size() == 30 - due_by_30);
  wheel.drain([](TimerTask&) {});
}

TEST_CASE(
    "timing_wheel.hpp: drain() unlinks every task of every level, for_each_task() visits each "
    "without unlinking") {
  TimingWheel wheel(1, 4, 0);
  auto tasks = make_counting_tasks(12);
  for (int i = 0; i < 12; ++i)
    REQUIRE(wheel.add(*tasks[i], 1 + i * i * 3));
  REQUIRE(wheel.levels() >= 3);
  std::set<const TimerTask*> visited;
  wheel.for_each_task([&](TimerTask& t) { CHECK(visited.insert(&t).second); });
  CHECK(visited.size() == 12);
  CHECK(wheel.size() == 12);
  std::set<const TimerTask*> drained;
  wheel.drain([&](TimerTask& t) { CHECK(drained.insert(&t).second); });
  CHECK(drained == visited);
  CHECK(wheel.size() == 0);
  CHECK_FALSE(wheel.next_expiration().has_value());
}

TEST_CASE(
    "timing_wheel.hpp: the destructor unlinks every task still held: each can be linked "
    "elsewhere afterwards") {
  auto tasks = make_counting_tasks(6);
  {
    TimingWheel wheel(1, 4, 0);
    for (int i = 0; i < 6; ++i)
      REQUIRE(wheel.add(*tasks[i], 2 + i * 10));
  }
  TimerTaskList list;  // a task still linked to the dead wheel would touch freed memory here
  for (auto& t : tasks)
    list.add(*t);
  CHECK(list.size() == 6);
  list.flush([](TimerTask&) {});
}

TEST_CASE(
    "timing_wheel.hpp: memory_bytes() is bookkeeping only: it grows with levels, not with the "
    "tasks held") {
  TimingWheel wheel(1, 20, 0);
  const std::size_t one_level = wheel.memory_bytes();
  CHECK(one_level > 0);
  auto tasks = make_counting_tasks(2000);
  for (int i = 0; i < 1000; ++i)
    REQUIRE(wheel.add(*tasks[i], 1 + i % 19));
  CHECK(wheel.memory_bytes() == one_level);
  for (int i = 1000; i < 2000; ++i)
    REQUIRE(wheel.add(*tasks[i], 100 + i % 200));
  CHECK(wheel.levels() == 2);
  const std::size_t two_levels = wheel.memory_bytes();
  CHECK(two_levels > one_level);
  wheel.drain([](TimerTask&) {});
  CHECK(wheel.memory_bytes() == two_levels);
}

namespace {

struct WheelTask : purgatory::TimerTask {
  void run() override {}
};

using purgatory::detail::TimingWheel;

std::vector<std::int64_t> expire_all_until(TimingWheel& wheel, std::int64_t time) {
  std::vector<std::int64_t> expired;
  while (wheel.expire_next(time, [&](purgatory::TimerTask& t) {
    if (!wheel.add(t, TimingWheel::expiration_of(t)))
      expired.push_back(TimingWheel::expiration_of(t));
  })) {
  }
  wheel.advance_clock(time);
  return expired;
}

}  // namespace

// Kafka's TimingWheelTest numbers: tick 10, 5 slots, started at 1000 (interval 50).
TEST_CASE("TimingWheel tick 10 size 5 at 1000: accepts 1020, rejects 999 and 1005") {
  TimingWheel wheel(10, 5, 1000);
  auto valid = purgatory::make_task<WheelTask>();
  CHECK(wheel.add(*valid, 1020));
  CHECK(wheel.size() == 1);
  auto expired = purgatory::make_task<WheelTask>();
  CHECK_FALSE(wheel.add(*expired, 999));
  auto same_tick = purgatory::make_task<WheelTask>();
  CHECK_FALSE(wheel.add(*same_tick, 1005));
  CHECK(wheel.size() == 1);
  CHECK(wheel.next_expiration() == 1020);
  TimingWheel::remove(*valid);
}

TEST_CASE("TimingWheel: a cancelled (removed) task leaves its bucket and never expires") {
  TimingWheel wheel(10, 5, 1000);
  auto task = purgatory::make_task<WheelTask>();
  REQUIRE(wheel.add(*task, 1020));
  TimingWheel::remove(*task);
  CHECK(wheel.size() == 0);
  CHECK_FALSE(wheel.next_expiration().has_value());
  CHECK(expire_all_until(wheel, 5000).empty());
}

TEST_CASE("TimingWheel: 1060 creates one overflow wheel and 1061 reuses it") {
  TimingWheel wheel(10, 5, 1000);
  CHECK(wheel.overflow_wheel() == nullptr);
  auto a = purgatory::make_task<WheelTask>();
  CHECK(wheel.add(*a, 1060));
  const TimingWheel* overflow = wheel.overflow_wheel();
  REQUIRE(overflow != nullptr);
  CHECK(overflow->tick() == 50);
  CHECK(overflow->current_time() == 1000);
  auto b = purgatory::make_task<WheelTask>();
  CHECK(wheel.add(*b, 1061));
  CHECK(wheel.overflow_wheel() == overflow);
  CHECK(wheel.levels() == 2);
  CHECK(wheel.level_size() == 0);
  CHECK(overflow->level_size() == 2);
  TimingWheel::remove(*a);
  TimingWheel::remove(*b);
}

TEST_CASE("TimingWheel: advance_clock within a tick, to the next tick, and through the overflow") {
  TimingWheel wheel(10, 5, 1000);
  wheel.advance_clock(1005);
  CHECK(wheel.current_time() == 1000);
  wheel.advance_clock(1010);
  CHECK(wheel.current_time() == 1010);
  auto task = purgatory::make_task<WheelTask>();
  REQUIRE(wheel.add(*task, 1070));  // overflow, bucket starting at 1050
  TimingWheel::remove(*task);
  wheel.advance_clock(1060);
  CHECK(wheel.current_time() == 1060);
  CHECK(wheel.overflow_wheel()->current_time() == 1050);
}

TEST_CASE("TimingWheel: overflow tasks cascade down and expire at their own tick") {
  TimingWheel wheel(10, 5, 1000);
  std::vector<purgatory::Ref<WheelTask>> tasks;
  // Tick-aligned, as SystemTimer makes them (it rounds deadlines up to the tick).
  const std::vector<std::int64_t> expirations = {1020, 1060, 1070, 1240, 1250, 2000, 100000};
  for (std::int64_t e : expirations) {
    tasks.push_back(purgatory::make_task<WheelTask>());
    REQUIRE(wheel.add(*tasks.back(), e));
  }
  CHECK(wheel.size() == expirations.size());
  // Each task comes out exactly when the clock reaches its tick, never before.
  for (std::int64_t e : expirations) {
    CHECK(expire_all_until(wheel, e - 1).empty());
    const auto out = expire_all_until(wheel, e);
    REQUIRE(out.size() == 1);
    CHECK(out[0] == e);
  }
  CHECK(wheel.size() == 0);
}

TEST_CASE("TimingWheel: next_expiration jumps straight to the next non-empty bucket") {
  TimingWheel wheel(1, 64, 0);
  auto a = purgatory::make_task<WheelTask>();
  auto b = purgatory::make_task<WheelTask>();
  REQUIRE(wheel.add(*a, 63));
  REQUIRE(wheel.add(*b, 5000));
  CHECK(wheel.next_expiration() == 63);
  CHECK(expire_all_until(wheel, 63).size() == 1);
  // b sits in a coarser level whose bucket starts at 4096.
  CHECK(wheel.next_expiration() == 4096);
  CHECK(expire_all_until(wheel, 4999).empty());
  CHECK(wheel.next_expiration() == 5000);
  CHECK(expire_all_until(wheel, 5000).size() == 1);
  CHECK_FALSE(wheel.next_expiration().has_value());
}

TEST_CASE("TimingWheel: bad tick, wheel size and start time are rejected with the value named") {
  CHECK_THROWS_WITH_AS(TimingWheel(0, 20, 0), doctest::Contains("tick must be > 0, got 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(TimingWheel(-5, 20, 0), doctest::Contains("got -5"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(TimingWheel(1, 1, 0), doctest::Contains("got 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(TimingWheel(1, TimingWheel::kMaxWheelSize + 1, 0),
                       doctest::Contains("got 65537"), std::invalid_argument);
  CHECK_THROWS_AS(TimingWheel(1, 20, -1), std::invalid_argument);
  CHECK_NOTHROW(TimingWheel(1, TimingWheel::kMaxWheelSize, 0));
}

TEST_CASE("TimingWheel: a huge wheel (4096 slots) finds buckets across bitmap words") {
  TimingWheel wheel(1, 4096, 0);
  std::vector<purgatory::Ref<WheelTask>> tasks;
  for (std::int64_t e : {4000, 70, 64, 129, 3000}) {
    tasks.push_back(purgatory::make_task<WheelTask>());
    REQUIRE(wheel.add(*tasks.back(), e));
  }
  std::vector<std::int64_t> order;
  while (auto next = wheel.next_expiration()) {
    const auto out = expire_all_until(wheel, *next);
    order.insert(order.end(), out.begin(), out.end());
  }
  CHECK(order == std::vector<std::int64_t>{64, 70, 129, 3000, 4000});
}

// reserve_levels() promises that an add() for the same expiration afterwards allocates nothing:
// it makes every level that add() would. It decides with one comparison against how far the levels
// reach, which must never claim more than they do, whatever the levels' current times (each
// rounded down to its own tick, so a coarse level lags the finest) and whichever call made them
// (add() makes levels too). Half the expirations fall at a level's edge, where its lag matters.
TEST_CASE("TimingWheel: after reserve_levels(e), add(e) makes no level, for any clock and e") {
  std::vector<purgatory::Ref<WheelTask>> tasks;  // outlive the wheel, which unlinks them
  TimingWheel wheel(10, 5, 1003);                // levels of 50, 250, 1250, ... wide
  std::mt19937_64 rng(27);
  const auto draw = [&rng](std::int64_t n) {  // uniform in [0, n)
    return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
  };
  std::int64_t now = 1003;
  for (int step = 0; step < 20000; ++step) {
    // Anywhere from within level 0 to far beyond the levels made so far, or (below) at an edge.
    std::int64_t e = now + 10 + draw(std::int64_t{10} << draw(40));
    if (rng() % 2 == 1) {
      // At the edge of a level's interval: from the edge measured from that level's clock to the
      // edge measured from level 0's (later by as much as the level lags), a tick either side.
      // Edges climb a level at a time until the top level's interval saturates at INT64_MAX; that
      // level has no edge to test, so the expiration above stands.
      const TimingWheel* level = &wheel;
      for (std::int64_t k = draw(wheel.levels()); k > 0; --k)
        level = level->overflow_wheel();
      const std::int64_t lag = wheel.current_time() - level->current_time();
      const std::int64_t room = std::numeric_limits<std::int64_t>::max() - level->current_time();
      if (level->interval() - 10 < room - lag - 20)
        e = std::max(now + 10, level->current_time() + level->interval() - 10 + draw(lag + 20));
    }
    tasks.push_back(purgatory::make_task<WheelTask>());
    if (rng() % 8 == 0) {
      CHECK(wheel.add(*tasks.back(), e));  // levels made by add() itself
    } else {
      wheel.reserve_levels(e);
      const int reserved = wheel.levels();
      REQUIRE(wheel.add(*tasks.back(), e));
      REQUIRE_MESSAGE(wheel.levels() == reserved, "clock " << now << ", expiration " << e);
    }
    if (rng() % 4 == 0) {
      now += draw(700);
      (void)expire_all_until(wheel, now);
    }
  }
}
