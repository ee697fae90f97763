/// @file
/// What a purgatory reports about itself: Kafka's PurgatorySize and NumDelayedOperations gauges,
/// outcome counters, and how long operations waited.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

#include "purgatory/latency_histogram.hpp"
#include "purgatory/purgatory_options.hpp"  // version 0.1 declared PurgatoryOptions here

namespace purgatory {

class DelayedOperation;

/// What DelayedOperationPurgatory::metrics() reports. A consistent-enough snapshot (each field is
/// read atomically, not all of them at one instant).
struct PurgatoryMetrics {
  std::string name;                   ///< the purgatory's name (PurgatoryOptions::name)
  std::size_t watched = 0;            ///< (operation, key) pairs watched now: Kafka's PurgatorySize
  std::size_t delayed = 0;            ///< operations waiting now: Kafka's NumDelayedOperations
  std::uint64_t completed_total = 0;  ///< completed by try_complete()/force_complete()
  std::uint64_t expired_total = 0;    ///< expired: the timeout won
  std::uint64_t shut_down_total = 0;  ///< completed by shutdown()
  /// Withdrawn: cancelled (Outcome::cancelled), or handed back undecided by cancel_for_key()
  std::uint64_t cancelled_total = 0;
  LatencyHistogram::Summary waited;             ///< from watch to outcome, over every outcome
  LatencyHistogram::Snapshot waited_histogram;  ///< the same, every bucket and the sum
};

}  // namespace purgatory
