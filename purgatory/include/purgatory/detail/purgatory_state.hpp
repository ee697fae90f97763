// Internal: the key-independent half of a purgatory's shared state (metrics, error reporting).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "purgatory/detail/watch_registry.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "purgatory/timer/clock.hpp"

namespace purgatory::detail {

// Thread-safe.
class PurgatoryState : public WatchRegistry {
 public:
  PurgatoryState(std::string name, CallbackErrorHandler on_error, const Clock& clock);

  void report_error(const DelayedOperation& op, std::exception_ptr error,
                    std::string_view where) noexcept override;

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
};

}  // namespace purgatory::detail
