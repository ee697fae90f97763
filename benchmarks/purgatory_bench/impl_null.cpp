// --impl=null: the harness alone (its CPU cost is in every implementation's figures).
//
// No purgatory, but the measurement work of BenchOperation's callbacks (a clock read, the
// histogram records, the resolved count): those callbacks are the harness's, so ours minus null
// is the purgatory's own cost. A request that will not be completed "expires" at once.

#include <chrono>
#include <cstddef>
#include <vector>

#include "mode_rate.hpp"
#include "purgatory_under_test.hpp"
#include "stats.hpp"

namespace purgatory_bench {
namespace {

class Null {
 public:
  struct Handle {
    Clock::time_point arrival;
    Clock::time_point completes_at;
    Stats* stats = nullptr;
  };
  explicit Null(const Config&) {}
  Handle add(std::chrono::nanoseconds timeout, Clock::time_point arrival,
             Clock::time_point completes_at, const std::vector<int>&, Stats& stats) {
    if (!completes_in_time(arrival, completes_at, timeout)) {
      stats.expiry.record(Clock::now() - arrival);
      stats.resolved.fetch_add(1);
    }
    return {arrival, completes_at, &stats};
  }
  static void complete(const Handle& h) { record_completed(*h.stats, h.arrival, h.completes_at); }
  static std::size_t watched() { return 0; }
  static std::size_t delayed() { return 0; }
  static void shutdown() {}
};

}  // namespace

// Null parks nothing: --parked skips it.
const Implementation& null_implementation() {
  static constexpr Implementation kNull{"null", &run_rate<Null>, nullptr, nullptr};
  return kNull;
}

}  // namespace purgatory_bench
