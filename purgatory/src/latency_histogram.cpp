#include "purgatory/latency_histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace purgatory {

int LatencyHistogram::bucket_of(std::uint64_t value) noexcept {
  if (value < kSubBuckets) return static_cast<int>(value);
  const int msb = 63 - std::countl_zero(value);
  const int shift = msb - 3;
  return (shift + 1) * kSubBuckets + static_cast<int>((value >> shift) & (kSubBuckets - 1));
}

std::uint64_t LatencyHistogram::upper_bound_of(int bucket) noexcept {
  if (bucket < kSubBuckets) return static_cast<std::uint64_t>(bucket);
  const int shift = bucket / kSubBuckets - 1;
  const auto sub = static_cast<std::uint64_t>(bucket % kSubBuckets);
  const std::uint64_t next = (kSubBuckets + sub + 1) << shift;
  return next == 0 ? UINT64_MAX : next - 1;
}

void LatencyHistogram::record(Nanos value) noexcept {
  const std::int64_t v = std::max<std::int64_t>(value.count(), 0);
  counts_[static_cast<std::size_t>(bucket_of(static_cast<std::uint64_t>(v)))].fetch_add(
      1, std::memory_order_relaxed);
  sum_.fetch_add(static_cast<std::uint64_t>(v), std::memory_order_relaxed);
  std::int64_t seen = max_.load(std::memory_order_relaxed);
  while (v > seen && !max_.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
  }
}

std::uint64_t LatencyHistogram::count() const noexcept {
  std::uint64_t total = 0;
  for (const auto& c : counts_)
    total += c.load(std::memory_order_relaxed);
  return total;
}

Nanos LatencyHistogram::percentile(double quantile) const noexcept {
  std::array<std::uint64_t, kBuckets> snapshot{};
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    snapshot[i] = counts_[i].load(std::memory_order_relaxed);
    total += snapshot[i];
  }
  if (total == 0) return Nanos{0};
  const double q = std::clamp(quantile, 0.0, 1.0);
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total))));
  std::uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += snapshot[static_cast<std::size_t>(i)];
    if (seen >= rank) {
      const std::uint64_t bound = upper_bound_of(i);
      // The recorded maximum is exact: never report a percentile above it.
      return Nanos{std::min<std::int64_t>(static_cast<std::int64_t>(std::min<std::uint64_t>(
                                              bound, static_cast<std::uint64_t>(INT64_MAX))),
                                          max().count())};
    }
  }
  return max();
}

LatencyHistogram::Summary LatencyHistogram::summary() const noexcept {
  Summary s;
  s.count = count();
  s.p50 = percentile(0.50);
  s.p90 = percentile(0.90);
  s.p99 = percentile(0.99);
  s.p999 = percentile(0.999);
  s.max = max();
  return s;
}

LatencyHistogram::Snapshot LatencyHistogram::snapshot() const noexcept {
  Snapshot s;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
  }
  s.sum_ns = sum_.load(std::memory_order_relaxed);
  return s;
}

std::uint64_t LatencyHistogram::Snapshot::count() const noexcept {
  std::uint64_t total = 0;
  for (std::uint64_t c : counts)
    total += c;
  return total;
}

std::uint64_t LatencyHistogram::Snapshot::count_at_most(Nanos bound) const noexcept {
  if (bound < Nanos::zero()) return 0;
  const auto b = static_cast<std::uint64_t>(bound.count());
  std::uint64_t total = 0;
  for (int i = 0; i < kBuckets && upper_bound_of(i) <= b; ++i) {
    total += counts[static_cast<std::size_t>(i)];
  }
  return total;
}

void LatencyHistogram::reset() noexcept {
  for (auto& c : counts_)
    c.store(0, std::memory_order_relaxed);
  max_.store(0, std::memory_order_relaxed);
  sum_.store(0, std::memory_order_relaxed);
}

}  // namespace purgatory
