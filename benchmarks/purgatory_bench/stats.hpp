// What every run measures per request, recorded from the implementations' callbacks. Inline: it
// runs once per request inside each implementation's completion path.
#pragma once

#include <atomic>
#include <chrono>

#include "purgatory/latency_histogram.hpp"

namespace purgatory_bench {

using Clock = std::chrono::steady_clock;

struct Stats {
  purgatory::LatencyHistogram completion;  // arrival -> on_complete, for requests completed in time
  purgatory::LatencyHistogram expiry;      // arrival -> on_expiration
  purgatory::LatencyHistogram lateness;    // intended completion time -> on_complete
  std::atomic<long> early{0};              // completed before the intended time (must stay 0)
  std::atomic<long> resolved{0};
};

// A request completed in time: what every implementation records for it (the harness's work).
inline void record_completed(Stats& stats, Clock::time_point arrival,
                             Clock::time_point completes_at) {
  const auto now = Clock::now();
  stats.completion.record(now - arrival);
  stats.lateness.record(now - completes_at);
  if (now < completes_at) stats.early.fetch_add(1);
  stats.resolved.fetch_add(1);
}

// Whether the completer completes the request (its latency is below the timeout), else it expires.
inline bool completes_in_time(Clock::time_point arrival, Clock::time_point completes_at,
                              std::chrono::nanoseconds timeout) {
  return completes_at - arrival < timeout;
}

}  // namespace purgatory_bench
