/// @file
/// PurgatoryOptions: how a DelayedOperationPurgatory is built.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

#include "purgatory/timer/timer_options.hpp"

namespace purgatory {

class DelayedOperation;

/// Receives exceptions escaping an operation's callbacks; `where` names the callback. Called on
/// the thread that ran it, with no lock held (for try_complete(), which runs under the operation's
/// lock: once that thread has released it). Must not throw.
using CallbackErrorHandler = std::function<void(const DelayedOperation& op,
                                                std::exception_ptr error, std::string_view where)>;

/// How a DelayedOperationPurgatory is built. A plain value.
struct PurgatoryOptions {
  std::string name = "purgatory";  ///< names metrics, errors, and the purgatory's own timer
  /// Watch lists are split over this many independently locked shards, rounded up to a power of
  /// two, at most 65536 (about 700 bytes each). Kafka uses 512; 16 suits a few cores (see
  /// docs/benchmarks.md); raise it for many-core hosts.
  std::size_t shards = 16;
  /// For a purgatory that makes its own timer (whose name defaults to the purgatory's).
  TimerOptions timer{};
  CallbackErrorHandler on_callback_error{};  ///< null: print to stderr
  /// How late, as a fraction of its timeout, an operation may expire, in [0, 1]: 0 (the default)
  /// keeps the timer's one-tick promise; 0.125 lets a 1 s timeout expire up to 125 ms late
  /// (never early), and the timer then keeps it in a coarse bucket, moving it down its levels
  /// less often (SystemTimer::add(task, delay, slack); a slack below twice the timer's tick x
  /// wheel_size changes nothing). Kafka's own timeouts are only as exact as its 1 ms x 20 wheel
  /// and 200 ms reaper poll; Linux's timer wheel allows 12.5%.
  double timeout_slack = 0.0;
};

}  // namespace purgatory
