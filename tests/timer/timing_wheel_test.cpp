#include "timing_wheel.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include <doctest/doctest.h>

namespace {

struct NoopTask : purgatory::TimerTask {
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
  auto valid = purgatory::make_task<NoopTask>();
  CHECK(wheel.add(*valid, 1020));
  CHECK(wheel.size() == 1);
  auto expired = purgatory::make_task<NoopTask>();
  CHECK_FALSE(wheel.add(*expired, 999));
  auto same_tick = purgatory::make_task<NoopTask>();
  CHECK_FALSE(wheel.add(*same_tick, 1005));
  CHECK(wheel.size() == 1);
  CHECK(wheel.next_expiration() == 1020);
  TimingWheel::remove(*valid);
}

TEST_CASE("TimingWheel: a cancelled (removed) task leaves its bucket and never expires") {
  TimingWheel wheel(10, 5, 1000);
  auto task = purgatory::make_task<NoopTask>();
  REQUIRE(wheel.add(*task, 1020));
  TimingWheel::remove(*task);
  CHECK(wheel.size() == 0);
  CHECK_FALSE(wheel.next_expiration().has_value());
  CHECK(expire_all_until(wheel, 5000).empty());
}

TEST_CASE("TimingWheel: 1060 creates one overflow wheel and 1061 reuses it") {
  TimingWheel wheel(10, 5, 1000);
  CHECK(wheel.overflow_wheel() == nullptr);
  auto a = purgatory::make_task<NoopTask>();
  CHECK(wheel.add(*a, 1060));
  const TimingWheel* overflow = wheel.overflow_wheel();
  REQUIRE(overflow != nullptr);
  CHECK(overflow->tick() == 50);
  CHECK(overflow->current_time() == 1000);
  auto b = purgatory::make_task<NoopTask>();
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
  auto task = purgatory::make_task<NoopTask>();
  REQUIRE(wheel.add(*task, 1070));  // overflow, bucket starting at 1050
  TimingWheel::remove(*task);
  wheel.advance_clock(1060);
  CHECK(wheel.current_time() == 1060);
  CHECK(wheel.overflow_wheel()->current_time() == 1050);
}

TEST_CASE("TimingWheel: overflow tasks cascade down and expire at their own tick") {
  TimingWheel wheel(10, 5, 1000);
  std::vector<purgatory::Ref<NoopTask>> tasks;
  // Tick-aligned, as SystemTimer makes them (it rounds deadlines up to the tick).
  const std::vector<std::int64_t> expirations = {1020, 1060, 1070, 1240, 1250, 2000, 100000};
  for (std::int64_t e : expirations) {
    tasks.push_back(purgatory::make_task<NoopTask>());
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
  auto a = purgatory::make_task<NoopTask>();
  auto b = purgatory::make_task<NoopTask>();
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
  std::vector<purgatory::Ref<NoopTask>> tasks;
  for (std::int64_t e : {4000, 70, 64, 129, 3000}) {
    tasks.push_back(purgatory::make_task<NoopTask>());
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
  std::vector<purgatory::Ref<NoopTask>> tasks;  // outlive the wheel, which unlinks them
  TimingWheel wheel(10, 5, 1003);               // levels of 50, 250, 1250, ... wide
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
    tasks.push_back(purgatory::make_task<NoopTask>());
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
