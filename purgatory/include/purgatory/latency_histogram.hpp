// LatencyHistogram: a fixed-size, lock-free histogram of durations, for metrics.
//
// Log-linear buckets (8 per power of two, so any percentile is within 12.5% above the truth),
// covering 1 ns to centuries in 496 counters: recording is one relaxed atomic increment and the
// memory never grows, however many values are recorded.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "purgatory/export.hpp"
#include "purgatory/timer/clock.hpp"

namespace purgatory {

// Thread-safe: record() from any number of threads while others read.
class PURGATORY_EXPORT LatencyHistogram {
 public:
  static constexpr int kSubBuckets = 8;
  static constexpr int kBuckets = 496;

  struct Summary {
    std::uint64_t count = 0;
    Nanos p50{0}, p90{0}, p99{0}, p999{0}, max{0};
  };

  // A copy of the counters, for exporting them (e.g. to Prometheus' fixed bucket bounds).
  // Thread-compatible plain value. Read counter by counter while others may record, so `sum_ns`
  // may lag the counts by a value in flight.
  struct PURGATORY_EXPORT Snapshot {
    std::array<std::uint64_t, kBuckets> counts{};
    std::uint64_t sum_ns = 0;
    [[nodiscard]] std::uint64_t count() const noexcept;
    // Values in the buckets lying wholly at or below `bound`: a lower bound on the true count
    // (a value up to 12.5% under `bound` may only be counted at the next bound up).
    [[nodiscard]] std::uint64_t count_at_most(Nanos bound) const noexcept;
  };

  // Negative values count as 0.
  void record(Nanos value) noexcept;

  [[nodiscard]] std::uint64_t count() const noexcept;
  // The smallest bucket upper bound below which at least `quantile` (0..1) of the values lie;
  // 0 when empty. Never below the true percentile, at most 12.5% above it.
  [[nodiscard]] Nanos percentile(double quantile) const noexcept;
  [[nodiscard]] Nanos max() const noexcept { return Nanos{max_.load(std::memory_order_relaxed)}; }
  [[nodiscard]] Summary summary() const noexcept;
  [[nodiscard]] Snapshot snapshot() const noexcept;
  // Sum of every value recorded.
  [[nodiscard]] Nanos sum() const noexcept {
    return Nanos{static_cast<Nanos::rep>(sum_.load(std::memory_order_relaxed))};
  }

  void reset() noexcept;

 private:
  static int bucket_of(std::uint64_t value) noexcept;
  static std::uint64_t upper_bound_of(int bucket) noexcept;

  std::array<std::atomic<std::uint64_t>, kBuckets> counts_{};
  std::atomic<std::int64_t> max_{0};
  std::atomic<std::uint64_t> sum_{0};
};

}  // namespace purgatory
