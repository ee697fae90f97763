/// @file
/// LatencyHistogram: a fixed-size, lock-free histogram of durations, for metrics.
///
/// Log-linear buckets (8 per power of two, so any percentile is within 12.5% above the truth),
/// covering 1 ns to centuries in 496 counters: recording is one relaxed atomic increment and the
/// memory never grows, however many values are recorded.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "purgatory/export.hpp"
#include "purgatory/timer/clock.hpp"

namespace purgatory {

/// A histogram of durations with log-linear buckets (see the file's overview).
/// Thread-safe: record() from any number of threads while others read.
class PURGATORY_EXPORT LatencyHistogram {
 public:
  static constexpr int kSubBuckets = 8;  ///< buckets per power of two
  static constexpr int kBuckets = 496;   ///< counters in all

  /// Percentiles as percentile() gives them (at most 12.5% above the truth), and the maximum.
  struct Summary {
    std::uint64_t count = 0;  ///< values recorded
    Nanos p50{0};             ///< 50th percentile
    Nanos p90{0};             ///< 90th percentile
    Nanos p99{0};             ///< 99th percentile
    Nanos p999{0};            ///< 99.9th percentile
    Nanos max{0};             ///< the largest value (exact)
  };

  /// A copy of the counters, for exporting them (to Prometheus' fixed bucket bounds, say).
  /// Thread-compatible plain value. Read counter by counter while others may record, so `sum_ns`
  /// may lag the counts by a value in flight.
  struct PURGATORY_EXPORT Snapshot {
    std::array<std::uint64_t, kBuckets> counts{};  ///< values per bucket
    std::uint64_t sum_ns = 0;                      ///< sum of the values, in nanoseconds
    /// Values counted, over every bucket.
    [[nodiscard]] std::uint64_t count() const noexcept;
    /// Values in the buckets lying wholly at or below `bound`: a lower bound on the true count
    /// (a value up to 12.5% under `bound` may only be counted at the next bound up).
    [[nodiscard]] std::uint64_t count_at_most(Nanos bound) const noexcept;
  };

  /// Negative values count as 0.
  void record(Nanos value) noexcept;

  /// Values recorded.
  [[nodiscard]] std::uint64_t count() const noexcept;
  /// The smallest bucket upper bound below which at least `quantile` (0..1) of the values lie;
  /// 0 when empty. Never below the true percentile, at most 12.5% above it.
  [[nodiscard]] Nanos percentile(double quantile) const noexcept;
  /// The largest value recorded (exact).
  [[nodiscard]] Nanos max() const noexcept { return Nanos{max_.load(std::memory_order_relaxed)}; }
  /// count(), the usual percentiles and max().
  [[nodiscard]] Summary summary() const noexcept;
  /// A copy of every counter.
  [[nodiscard]] Snapshot snapshot() const noexcept;
  /// Sum of every value recorded.
  [[nodiscard]] Nanos sum() const noexcept {
    return Nanos{static_cast<Nanos::rep>(sum_.load(std::memory_order_relaxed))};
  }

  /// Sets every counter to 0 (not atomically with concurrent record() calls).
  void reset() noexcept;

 private:
  static int bucket_of(std::uint64_t value) noexcept;
  static std::uint64_t upper_bound_of(int bucket) noexcept;

  std::array<std::atomic<std::uint64_t>, kBuckets> counts_{};
  std::atomic<std::int64_t> max_{0};
  std::atomic<std::uint64_t> sum_{0};
};

}  // namespace purgatory
