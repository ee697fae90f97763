// What the workloads share: their seeds, the spans their deadlines are drawn from, and the untimed
// setup that leaves `pending` tasks waiting.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "timer_under_test.hpp"

namespace timer_bench {
namespace {

constexpr std::uint64_t kSeed = 20240611;
constexpr Nanos kCancelSpan = std::chrono::seconds(60);  // AddCancel, Readd, Reschedule: 0..60 s
constexpr Nanos kExpireSpan = std::chrono::milliseconds(100);  // AddExpire: 0..100 ms out
constexpr Nanos kExpireSlack = std::chrono::milliseconds(2);   // > a tick: the wheel rounds up

// Delays uniform over [1 ns, span], from a fixed seed; the timed loops cycle through a table so
// that drawing a random number costs the same small index for every implementation.
inline std::vector<Nanos> random_delays(std::size_t n, Nanos span, std::uint64_t seed = kSeed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<Nanos::rep> dist(1, span.count());
  std::vector<Nanos> delays(n);
  for (Nanos& d : delays)
    d = Nanos{dist(rng)};
  return delays;
}

constexpr std::size_t kTableSize = std::size_t{1} << 16;  // power of two: index with a mask

// Schedules tasks 0..pending-1 at random delays over `span` (untimed setup).
template <TimerUnderTest Impl>
void schedule_pending(Impl& impl, std::size_t pending, Nanos span) {
  const auto delays = random_delays(pending, span, kSeed + 1);
  for (std::size_t i = 0; i < pending; ++i)
    impl.add(i, delays[i]);
}

}  // namespace
}  // namespace timer_bench
