#include "purgatory/detail/purgatory_state.hpp"

#include "purgatory/detail/operation_access.hpp"

#include <exception>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace purgatory::detail {

namespace {

// The operations whose callbacks run on this thread now, innermost last: a shutdown() called from
// one of them must not wait for it (nor for those it is nested in).
struct RunningFinish {
  const WatchRegistry* registry;
  std::uint32_t slot;
};
thread_local std::vector<RunningFinish> t_finishing;

}  // namespace

PurgatoryState::PurgatoryState(std::string name, CallbackErrorHandler on_error, const Clock& clock,
                               std::size_t slots)
    : name_(std::move(name)),
      on_error_(std::move(on_error)),
      clock_(&clock),
      finishing_(std::make_unique<Finishing[]>(slots)) {}

void PurgatoryState::count_finishing(std::uint32_t slot) noexcept {
  finishing_[slot].count.fetch_add(1);
}

void PurgatoryState::finish_started(const DelayedOperation& op) noexcept {
  enter_finishing(OperationAccess::registry_slot(op));
}

void PurgatoryState::finished(const DelayedOperation& op) noexcept {
  leave_finishing(OperationAccess::registry_slot(op));
}

std::uint32_t PurgatoryState::hold_error(DelayedOperation& op) noexcept {
  // Watched, so every node is linked: the first one's shard, as for a decision (unwatch()).
  const std::uint32_t slot = OperationAccess::nodes(op)[0].list->shard;
  count_finishing(slot);
  return slot;
}

void PurgatoryState::report_held_error(const DelayedOperation& op, std::uint32_t slot,
                                       std::exception_ptr error, std::string_view where) noexcept {
  enter_finishing(slot);
  report_error(op, std::move(error), where);
  leave_finishing(slot);
}

void PurgatoryState::enter_finishing(std::uint32_t slot) noexcept {
  try {
    t_finishing.push_back({this, slot});
  } catch (...) {
    // Out of memory: a shutdown() from this callback would wait for it. Nothing better to do.
  }
}

void PurgatoryState::leave_finishing(std::uint32_t slot) noexcept {
  if (!t_finishing.empty() && t_finishing.back().registry == this) t_finishing.pop_back();
  finishing_[slot].count.fetch_sub(1);
  // Sequentially consistent with shutdown()'s store of the flag and its reads of the count: either
  // it sees this decrement, or we see the flag and wake it.
  if (shut_down.load()) finishing_[slot].count.notify_all();
}

void PurgatoryState::wait_finished(std::uint32_t slot) const noexcept {
  std::int32_t own = 0;
  for (const RunningFinish& f : t_finishing) {
    if (f.registry == this && f.slot == slot) ++own;
  }
  for (;;) {
    const std::int32_t now = finishing_[slot].count.load();
    if (now <= own) return;
    finishing_[slot].count.wait(now);
  }
}

void PurgatoryState::report_error(const DelayedOperation& op, std::exception_ptr error,
                                  std::string_view where) noexcept {
  if (on_error_) {
    try {
      on_error_(op, error, where);
    } catch (...) {
      fmt::print(stderr, "purgatory '{}': the callback error handler threw\n", name_);
    }
    return;
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    fmt::print(stderr, "purgatory '{}': DelayedOperation::{} threw: {}\n", name_, where, e.what());
  } catch (...) {
    fmt::print(stderr, "purgatory '{}': DelayedOperation::{} threw a non-std exception\n", name_,
               where);
  }
}

void PurgatoryState::account(Outcome outcome, Nanos since) noexcept {
  switch (outcome) {
    case Outcome::pending:  // cancelled: handed back undecided, so no waiting time either
      cancelled_.fetch_add(1, std::memory_order_relaxed);
      return;
    case Outcome::completed:
      completed_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Outcome::expired:
      expired_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Outcome::shut_down:
      shut_down_total_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  waited_.record(clock_->now() - since);
}

void PurgatoryState::account_unwatched(Outcome outcome) noexcept {
  account(outcome, clock_->now());
}

void PurgatoryState::fill(PurgatoryMetrics& m) const {
  m.name = name_;
  m.completed_total = completed_.load(std::memory_order_relaxed);
  m.expired_total = expired_.load(std::memory_order_relaxed);
  m.shut_down_total = shut_down_total_.load(std::memory_order_relaxed);
  m.cancelled_total = cancelled_.load(std::memory_order_relaxed);
  m.waited = waited_.summary();
  m.waited_histogram = waited_.snapshot();
}

}  // namespace purgatory::detail
