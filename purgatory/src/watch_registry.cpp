#include "purgatory/detail/purgatory_state.hpp"

#include "purgatory/detail/operation_access.hpp"

#include <cassert>
#include <exception>
#include <utility>

#include <fmt/core.h>

namespace purgatory::detail {

namespace {

// The innermost operation whose callbacks run on this thread now: a shutdown() called from one of
// them must not wait for it (nor for those it is nested in). The records live on the stack, so
// nothing is left to clean up when the thread ends.
thread_local FinishingFrame* t_finishing = nullptr;

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

void PurgatoryState::finish_started(const DelayedOperation& op, FinishingFrame& frame) noexcept {
  enter_finishing(OperationAccess::registry_slot(op), frame);
}

void PurgatoryState::finished(const DelayedOperation& op, FinishingFrame& frame) noexcept {
  leave_finishing(OperationAccess::registry_slot(op), frame);
}

std::uint32_t PurgatoryState::hold_error(DelayedOperation& op) noexcept {
  // Watched, so every node is linked: the first one's shard, as for a decision (unwatch()).
  const std::uint32_t slot = OperationAccess::nodes(op)[0].list->shard;
  count_finishing(slot);
  return slot;
}

void PurgatoryState::report_held_error(const DelayedOperation& op, std::uint32_t slot,
                                       std::exception_ptr error, std::string_view where) noexcept {
  FinishingFrame frame;
  enter_finishing(slot, frame);
  report_error(op, std::move(error), where);
  leave_finishing(slot, frame);
}

void PurgatoryState::enter_finishing(std::uint32_t slot, FinishingFrame& frame) noexcept {
  frame.registry = this;
  frame.slot = slot;
  frame.outer = t_finishing;
  t_finishing = &frame;
}

void PurgatoryState::leave_finishing(std::uint32_t slot, FinishingFrame& frame) noexcept {
  assert(t_finishing == &frame && "finishing records nest");
  t_finishing = frame.outer;
  finishing_[slot].count.fetch_sub(1);
  // Sequentially consistent with shutdown()'s store of the flag and its reads of the count: either
  // it sees this decrement, or we see the flag and wake it. Taking the mutex first means the
  // waiter is either before its check of the count (and sees the decrement) or already waiting.
  if (shut_down.load()) {
    { const std::lock_guard<std::mutex> lock(finished_mu_); }
    finished_cv_.notify_all();
  }
}

void PurgatoryState::wait_finished(std::uint32_t slot) const noexcept {
  std::int32_t own = 0;
  for (const FinishingFrame* f = t_finishing; f != nullptr; f = f->outer) {
    if (f->registry == this && f->slot == slot) ++own;
  }
  // A mutex and a condition variable, not std::atomic::wait(): where the system has no futex
  // (MinGW-w64 among them), libstdc++ 12 notifies without the mutex its waiters check under, so a
  // notification can be lost and shutdown() wait for ever (seen under Wine).
  std::unique_lock<std::mutex> lock(finished_mu_);
  finished_cv_.wait(lock, [&] { return finishing_[slot].count.load() <= own; });
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
