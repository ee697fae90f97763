// Tests of purgatory/latency_histogram.hpp: every promise of LatencyHistogram (docs/contracts.md).
#include "purgatory/latency_histogram.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "allocation_counter.hpp"
#include "purgatory_contract_support.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

// The value at `quantile` of sorted values: the smallest v with at least quantile*n values <= v.
std::int64_t true_percentile(const std::vector<std::int64_t>& sorted, double quantile) {
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<std::size_t>(std::ceil(quantile * n));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

void check_percentiles(const std::vector<std::int64_t>& values) {
  LatencyHistogram h;
  for (const auto v : values)
    h.record(Nanos{v});
  std::vector<std::int64_t> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  for (const double q : {0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const std::int64_t truth = true_percentile(sorted, q);
    const std::int64_t got = h.percentile(q).count();
    INFO("quantile " << q << ": truth " << truth << " ns, histogram " << got << " ns");
    CHECK(got >= truth);
    CHECK(static_cast<double>(got) <= static_cast<double>(truth) * 1.125 + 1.0);
  }
}

TEST_CASE(
    "latency_histogram.hpp: any percentile is never below the true one and at most 12.5% above "
    "it (uniform and log-uniform values, 1 ns to an hour)") {
  std::mt19937_64 rng(11);
  std::vector<std::int64_t> uniform;
  std::uniform_int_distribution<std::int64_t> u(1, 1'000'000);
  for (int i = 0; i < 20000; ++i)
    uniform.push_back(u(rng));
  check_percentiles(uniform);
  std::vector<std::int64_t> spread;
  std::uniform_real_distribution<double> exponent(0.0, std::log(3.6e12));
  for (int i = 0; i < 20000; ++i)
    spread.push_back(static_cast<std::int64_t>(std::exp(exponent(rng))));
  check_percentiles(spread);
  check_percentiles({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
}

TEST_CASE(
    "latency_histogram.hpp: covers 1 ns to centuries in 496 counters: a value of 200 years is "
    "counted, with its percentile within 12.5% above it") {
  static_assert(LatencyHistogram::kBuckets == 496);
  static_assert(LatencyHistogram::kSubBuckets == 8);
  LatencyHistogram h;
  const Nanos centuries = std::chrono::hours(24 * 365 * 200);
  h.record(Nanos{1});
  h.record(centuries);
  CHECK(h.count() == 2);
  CHECK(h.max() == centuries);
  CHECK(h.percentile(1.0) >= centuries);
  CHECK(static_cast<double>(h.percentile(1.0).count()) <=
        static_cast<double>(centuries.count()) * 1.125);
  CHECK(h.percentile(0.5) >= Nanos{1});
  CHECK(h.percentile(0.5) <= Nanos{2});
}

TEST_CASE(
    "latency_histogram.hpp: recording allocates nothing and the memory never grows, however many "
    "values are recorded") {
  LatencyHistogram h;
  CHECK(sizeof(LatencyHistogram) <= (LatencyHistogram::kBuckets + 4) * sizeof(std::uint64_t));
  const auto before = contract::allocation_counts();
  for (std::int64_t i = 0; i < 1'000'000; ++i)
    h.record(Nanos{i * 7919});
  const auto after = contract::allocation_counts();
  if (contract::counting_allocations()) CHECK(after.allocations == before.allocations);
  CHECK(h.count() == 1'000'000);
}

TEST_CASE(
    "latency_histogram.hpp: negative values count as 0, empty: count 0 and every percentile 0, "
    "reset() empties it") {
  LatencyHistogram h;
  CHECK(h.count() == 0);
  CHECK(h.percentile(0.5) == Nanos{0});
  CHECK(h.percentile(1.0) == Nanos{0});
  CHECK(h.max() == Nanos{0});
  CHECK(h.summary().count == 0);
  h.record(Nanos{-50});
  CHECK(h.count() == 1);
  CHECK(h.max() == Nanos{0});
  CHECK(h.sum() == Nanos{0});
  CHECK(h.percentile(1.0) <= Nanos{1});
  h.record(5ms);
  h.reset();
  CHECK(h.count() == 0);
  CHECK(h.max() == Nanos{0});
  CHECK(h.sum() == Nanos{0});
  CHECK(h.snapshot().count() == 0);
  CHECK(h.percentile(0.99) == Nanos{0});
}

TEST_CASE(
    "latency_histogram.hpp: summary() and sum(): count, p50/p90/p99/p999 as percentile(), exact "
    "max and the sum of every value") {
  LatencyHistogram h;
  std::int64_t sum = 0;
  for (std::int64_t ms = 1; ms <= 1000; ++ms) {
    h.record(std::chrono::milliseconds(ms));
    sum += Nanos(std::chrono::milliseconds(ms)).count();
  }
  const auto s = h.summary();
  CHECK(s.count == 1000);
  CHECK(s.p50 == h.percentile(0.5));
  CHECK(s.p90 == h.percentile(0.9));
  CHECK(s.p99 == h.percentile(0.99));
  CHECK(s.p999 == h.percentile(0.999));
  CHECK(s.max == 1000ms);
  CHECK(h.sum() == Nanos{sum});
  CHECK(s.p50 >= 500ms);
  CHECK(s.p50 <= Nanos(500ms) * 1125 / 1000);
}

TEST_CASE(
    "latency_histogram.hpp: Snapshot: every counter and the sum, count(), count_at_most(bound) is "
    "a lower bound that misses only values up to 12.5% under the bound") {
  LatencyHistogram h;
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<std::int64_t> u(1, 10'000'000);
  std::vector<std::int64_t> values;
  std::uint64_t sum = 0;
  for (int i = 0; i < 5000; ++i) {
    values.push_back(u(rng));
    h.record(Nanos{values.back()});
    sum += static_cast<std::uint64_t>(values.back());
  }
  const auto snap = h.snapshot();
  CHECK(snap.count() == 5000);
  CHECK(snap.sum_ns == sum);
  std::uint64_t total = 0;
  for (const auto c : snap.counts)
    total += c;
  CHECK(total == 5000);
  for (const std::int64_t bound : {1000, 100'000, 1'000'000, 5'000'000, 10'000'000}) {
    const auto at_most = [&](double b) {
      return static_cast<std::uint64_t>(
          std::count_if(values.begin(), values.end(),
                        [&](std::int64_t v) { return static_cast<double>(v) <= b; }));
    };
    const std::uint64_t got = snap.count_at_most(Nanos{bound});
    INFO("bound " << bound);
    CHECK(got <= at_most(static_cast<double>(bound)));
    CHECK(got >= at_most(static_cast<double>(bound) / 1.125));
  }
}

TEST_CASE(
    "latency_histogram.hpp: thread-safe: 4 threads record while another reads, nothing is lost") {
  LatencyHistogram h;
  const int per_thread = contract::rounds(50000, 10000);
  std::atomic<bool> done{false};
  bool went_back = false;
  std::thread reader([&] {
    std::uint64_t last = 0;
    while (!done.load()) {
      const auto c = h.count();
      (void)h.summary();
      (void)h.snapshot();
      if (c < last) went_back = true;
      last = c;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i)
        h.record(Nanos{(t + 1) * 1000});
    });
  }
  for (auto& w : writers)
    w.join();
  done = true;
  reader.join();
  CHECK_FALSE(went_back);
  CHECK(h.count() == static_cast<std::uint64_t>(4 * per_thread));
  CHECK(h.sum() == Nanos{static_cast<std::int64_t>(per_thread) * (1000 + 2000 + 3000 + 4000)});
  CHECK(h.max() == Nanos{4000});
}

}  // namespace
}  // namespace purgatory::test

namespace purgatory {
namespace {

using namespace std::chrono_literals;

TEST_CASE("latency histogram: percentiles within 12.5% above the truth and never above max") {
  LatencyHistogram h;
  CHECK(h.percentile(0.5) == Nanos{0});
  for (int i = 1; i <= 1000; ++i)
    h.record(std::chrono::microseconds(i));
  CHECK(h.count() == 1000);
  const auto p50 = h.percentile(0.50);
  CHECK(p50 >= 500us);
  CHECK(p50 <= 563us);
  const auto p99 = h.percentile(0.99);
  CHECK(p99 >= 990us);
  CHECK(p99 <= 1000us);  // capped by the exact maximum
  CHECK(h.max() == 1000us);
  const auto s = h.summary();
  CHECK(s.count == 1000);
  CHECK(s.p90 >= 900us);
  h.record(Nanos{-5});  // counts as 0
  CHECK(h.count() == 1001);
  h.reset();
  CHECK(h.count() == 0);
}

}  // namespace
}  // namespace purgatory

TEST_CASE("LatencyHistogram snapshot: sum, count and cumulative counts at arbitrary bounds") {
  purgatory::LatencyHistogram h;
  using std::chrono::milliseconds;
  for (int ms : {1, 2, 3, 10, 100})
    h.record(milliseconds(ms));
  const auto s = h.snapshot();
  CHECK(s.count() == 5);
  CHECK(s.sum_ns == 116'000'000U);
  CHECK(h.sum() == milliseconds(116));
  CHECK(s.count_at_most(milliseconds(0)) == 0);
  // A bucket counts only once it lies wholly under the bound: never more than the truth.
  CHECK(s.count_at_most(milliseconds(5)) == 3);
  CHECK(s.count_at_most(milliseconds(50)) == 4);
  CHECK(s.count_at_most(milliseconds(1000)) == 5);
  std::uint64_t last = 0;
  for (int ms = 0; ms <= 200; ++ms) {  // cumulative: never goes down
    const auto c = s.count_at_most(milliseconds(ms));
    CHECK(c >= last);
    CHECK(c <= s.count());
    last = c;
  }
}
