// Internal: the key-independent half of a purgatory's shared state (metrics, error reporting).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "purgatory/detail/watch_registry.hpp"
#include "purgatory/export.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "purgatory/timer/clock.hpp"

namespace purgatory::detail {

// Thread-safe.
//
// Waiting for callbacks (shutdown()). Each slot (one per shard) counts the operations decided
// there (by the purgatory, under that shard's lock), the try_complete() errors held there, and how
// many of both have finished: shutdown() waits until the finished count catches up with the other
// two as they were once nothing was watched any more. A finishing thread's last access to this
// state is its increment of `done` (so the state may be freed right after); to wake a waiting
// shutdown() it then touches only process-wide words.
class PURGATORY_EXPORT PurgatoryState : public WatchRegistry {
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

  void finish_started(RunningFinish& running, std::uint32_t slot) noexcept override;
  void finished(RunningFinish& running) noexcept override;
  // Returns once, in every slot, the operations decided (`decided[slot]`, counted by the
  // purgatory) and the errors held have finished, except those whose callbacks (or report) are
  // running on the calling thread (a shutdown() called from a callback): those keep this state
  // alive until they end. Call after shut_down is set and once nothing is watched.
  void wait_finished(const std::uint64_t* decided) noexcept;

  // Records the wait of a watched operation whose outcome was just decided (the purgatory's
  // shards count the outcomes themselves).
  void record_wait(Nanos since) noexcept;
  // Accounts for an operation that completed on its first try, never watched.
  void account_unwatched_completion() noexcept;
  // Fills the name, the waiting times and the completions on a first try; the purgatory adds
  // the gauges and the outcomes of watched operations, which its shards count.
  void fill(PurgatoryMetrics& m) const;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const Clock& clock() const noexcept { return *clock_; }
  [[nodiscard]] std::size_t slots() const noexcept { return slots_; }

  std::atomic<bool> shut_down{false};

 private:
  const std::string name_;
  const CallbackErrorHandler on_error_;
  const Clock* const clock_;
  std::atomic<std::uint64_t> completed_unwatched_{0};
  LatencyHistogram waited_;
  struct alignas(64) Finishing {
    std::atomic<std::uint64_t> held{0};  // try_complete() errors held
    std::atomic<std::uint64_t> done{0};  // decided operations and held errors finished
  };
  const std::size_t slots_;
  std::unique_ptr<Finishing[]> finishing_;

  // The calling thread runs (then has run) user code counted in `slot`.
  void enter_finishing(RunningFinish& running, std::uint32_t slot) noexcept;
  void leave_finishing(RunningFinish& running) noexcept;
};

}  // namespace purgatory::detail
