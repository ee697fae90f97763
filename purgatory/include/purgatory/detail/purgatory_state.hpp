// Internal: the key-independent half of a purgatory's shared state (metrics, error reporting).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "purgatory/detail/watch_registry.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "purgatory/timer/clock.hpp"

namespace purgatory::detail {

// Thread-safe.
class PurgatoryState : public WatchRegistry {
 public:
  // `slots`: how many finishing counters (the purgatory uses one per shard, so that completing
  // threads do not share one counter).
  PurgatoryState(std::string name, CallbackErrorHandler on_error, const Clock& clock,
                 std::size_t slots);

  void report_error(const DelayedOperation& op, std::exception_ptr error,
                    std::string_view where) noexcept override;
  std::uint32_t hold_error(DelayedOperation& op) noexcept override;
  void report_held_error(const DelayedOperation& op, std::uint32_t slot, std::exception_ptr error,
                         std::string_view where) noexcept override;

  // Counts one operation of `slot` as decided but not finished (its callbacks yet to run).
  void count_finishing(std::uint32_t slot) noexcept;
  void finish_started(const DelayedOperation& op, FinishingFrame& frame) noexcept override;
  void finished(const DelayedOperation& op, FinishingFrame& frame) noexcept override;
  // Returns once every operation counted in `slot` has finished, except those whose callbacks
  // are running on the calling thread (a shutdown() called from a callback). Call after
  // shut_down is set.
  void wait_finished(std::uint32_t slot) const noexcept;

  // Accounts for one operation leaving the purgatory after waiting since `since`.
  void account(Outcome outcome, Nanos since) noexcept;
  // Accounts for an operation that completed on its first try, never watched.
  void account_unwatched(Outcome outcome) noexcept;
  // Fills everything but the gauges (watched, delayed), which the purgatory's shards hold.
  void fill(PurgatoryMetrics& m) const;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const Clock& clock() const noexcept { return *clock_; }

  std::atomic<bool> shut_down{false};

 private:
  const std::string name_;
  const CallbackErrorHandler on_error_;
  const Clock* const clock_;
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> expired_{0};
  std::atomic<std::uint64_t> shut_down_total_{0};
  std::atomic<std::uint64_t> cancelled_{0};
  LatencyHistogram waited_;
  struct alignas(64) Finishing {
    std::atomic<std::int32_t> count{0};
  };
  std::unique_ptr<Finishing[]> finishing_;
  // wait_finished() sleeps on these until the counts it waits for drop (after shut_down is set).
  mutable std::mutex finished_mu_;
  mutable std::condition_variable finished_cv_;

  // The calling thread runs (then has run) user code counted in `slot`, recorded in `frame`.
  void enter_finishing(std::uint32_t slot, FinishingFrame& frame) noexcept;
  void leave_finishing(std::uint32_t slot, FinishingFrame& frame) noexcept;
};

}  // namespace purgatory::detail
