#include "purgatory/latency_histogram.hpp"

#include <chrono>

#include <doctest/doctest.h>

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
