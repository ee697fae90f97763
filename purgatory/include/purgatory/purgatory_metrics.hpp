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
#include "purgatory/timer/system_timer.hpp"

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
  std::uint64_t cancelled_total = 0;  ///< handed back by cancel_for_key()
  LatencyHistogram::Summary waited;   ///< from watch to outcome, over every outcome
  LatencyHistogram::Snapshot waited_histogram;  ///< the same, every bucket and the sum
};

/// Receives exceptions escaping an operation's callbacks; `where` names the callback. Called on
/// the thread that ran it, with no lock held (for try_complete(), which runs under the operation's
/// lock: once that thread has released it). Must not throw.
using CallbackErrorHandler = std::function<void(const DelayedOperation& op,
                                                std::exception_ptr error, std::string_view where)>;

/// How a DelayedOperationPurgatory is built. A plain value.
struct PurgatoryOptions {
  std::string name = "purgatory";  ///< names metrics, errors, and the purgatory's own timer
  /// Watch lists are split over this many independently locked shards (rounded up to a power of
  /// two, at most 65536). Kafka uses 512; purgatory_bench --shards on 2 cores: 8 to 64 cost the
  /// same within noise, 512 about 1.5-2x the CPU (cache footprint). Raise it for many-core hosts.
  /// Each shard takes about 700 bytes before any key is watched (its lock, its key map, a 64-slot
  /// lookup in front of the map, and its counters).
  std::size_t shards = 16;
  /// For a purgatory that creates its own timer (its name defaults to the purgatory's).
  TimerOptions timer;
  CallbackErrorHandler on_callback_error;  ///< null: print to stderr
};

}  // namespace purgatory
