#include "purgatory/detail/purgatory_state.hpp"

#include <exception>
#include <utility>

#include <fmt/core.h>

namespace purgatory::detail {

PurgatoryState::PurgatoryState(std::string name, CallbackErrorHandler on_error, const Clock& clock)
    : name_(std::move(name)), on_error_(std::move(on_error)), clock_(&clock) {}

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
