#include "purgatory/delayed_operation.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "purgatory/timer/detail/race_point.hpp"

// How an operation's state is kept (the members are declared in delayed_operation.hpp):
//
// decision_: the outcome (low three bits) and kClaimed (a purgatory accepted the watch). Written
// only under lock_ (so plain stores), read anywhere.
//
// notes_: why try_complete() must run again (bits), set by checkers that found the lock held:
// kDirectCheck, a caller asked (safe_try_complete(), the watch itself); kWatchCheck, a purgatory's
// check of a watched key (void once the operation is no longer watched); kNestedCheck, a check
// made from inside this operation's own try_complete() (honoured once, not again for a check made
// by the run it caused).
//
// signals_: set without the lock, by read-modify-writes. kExpiring: run() was called, the expiry
// decides, nobody else. The outcome listener: kListenerSet (listen() was called), then kListening
// (it is stored) and kFinished (the callbacks ran) in either order: whoever sets the second of
// those two calls it.
//
// held_: guarded by lock_. kDeferred: finish() on the last unlock. kInTryComplete: try_complete()
// is running. kErrorsHeld: report_held_errors() on the last unlock. kWatched: a purgatory watches
// the operation now (its nodes are allocated, and linked unless being set up).
//
// finish_counted_: written under lock_ when the outcome is decided, then read (and cleared) by the
// thread that runs finish(): whether the registry counts it as finishing until finish() ends.
// watched_since_: kNotWatched until a watch commits (a clock never reads negative). registry_:
// not reference counted while watched (the purgatory outlives every operation it watches);
// finish() keeps it alive when it must (see RunningFinish).
//
// complete_with(outcome, only_if_watched): decides `outcome` unless decided already; the callbacks
// run on the last unlock. With only_if_watched (the expiry) it decides only an operation a
// purgatory still watches: one withdrawn (cancel_for_key()) after the timer claimed the run but
// before it called run() is its owner's. shut_down_unless_expiring(): decides shut_down if watched,
// unless the expiry has begun (that expiry decides, once it has the lock); false only then.
// decide_locked(): records the outcome, leaves the timer and every watch list.
// release_last_hold(): releases the lock held once, then does what the hold left to do (reports
// held errors, runs the callbacks of a completion decided under it, serves skipped checks).
// run_try_complete_locked(reason): runs try_complete() for `reason` and for the notes left
// meanwhile (lock held, not inside try_complete()); returns whether it decided.

namespace purgatory {

namespace {

// Exceptions try_complete() threw while this thread held an operation's lock, oldest first: each
// is reported once the thread releases that lock's last hold, so that the error handler runs with
// no lock held (a holder is a thread, so the thread that threw is the one that reports). Made on
// the first such error and freed once all are reported, so that nothing is left to clean up when
// the thread ends (a thread_local vector's destructor crashes MinGW builds, GCC PR 80816).
struct HeldError {
  const DelayedOperation* op;
  boost::intrusive_ptr<detail::WatchRegistry> registry;  // null: not watched, to stderr
  std::uint32_t slot;                                    // the registry's (hold_error())
  std::exception_ptr error;
};
thread_local std::vector<HeldError>* t_held_errors = nullptr;

void print_error(const std::exception_ptr& error, std::string_view where) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "purgatory: DelayedOperation::%.*s threw: %s\n",
                 static_cast<int>(where.size()), where.data(), e.what());
  } catch (...) {
    std::fprintf(stderr, "purgatory: DelayedOperation::%.*s threw a non-std exception\n",
                 static_cast<int>(where.size()), where.data());
  }
}

}  // namespace

DelayedOperation::~DelayedOperation() {
  // A watched operation is referenced by its purgatory until unwatched, so it cannot die linked.
}

bool DelayedOperation::force_complete() {
  return complete_with(Outcome::completed);
}

bool DelayedOperation::cancel() {
  if (is_completed()) return false;
  const bool nested = lock_.held_by_current_thread();
  if (!nested) lock_.lock();
  // An expiry that began decides (as for shutdown() and cancel_for_key()).
  const bool expiring =
      watched_locked() && (signals_.load(std::memory_order_acquire) & kExpiring) != 0;
  const bool won = !expiring && decide_locked(Outcome::cancelled);
  if (won) held_ |= kDeferred;
  if (!nested) release_last_hold();
  return won;
}

void DelayedOperation::run() {
  // Before the lock: a shutdown() or cancel_for_key() holding it meanwhile sees that the expiry
  // has begun, and leaves the operation to it.
  signals_.fetch_or(kExpiring);
  (void)complete_with(Outcome::expired, /*only_if_watched=*/true);
}

// No reference of its own is taken on these paths: the caller holds one (see the class), so the
// watch reference that deciding drops is never the last.
bool DelayedOperation::complete_with(Outcome outcome, bool only_if_watched) {
  if (is_completed()) return false;
  PURGATORY_RACE_POINT("DelayedOperation::complete_with: still pending, before the lock");
  if (lock_.held_by_current_thread()) {
    // Inside try_complete(), or between lock() and unlock(): that hold's last unlock finishes it.
    const bool won = (!only_if_watched || watched_locked()) && decide_locked(outcome);
    if (won) held_ |= kDeferred;
    return won;
  }
  lock_.lock();
  const bool won = (!only_if_watched || watched_locked()) && decide_locked(outcome);
  if (won) held_ |= kDeferred;
  release_last_hold();
  return won;
}

bool DelayedOperation::shut_down_unless_expiring() {
  if (is_completed()) return true;
  PURGATORY_RACE_POINT("DelayedOperation::shut_down_unless_expiring: pending, before the lock");
  lock();
  // An expiry that began waits for this lock to decide: it keeps its course (see shutdown()).
  const bool expiring =
      watched_locked() && (signals_.load(std::memory_order_acquire) & kExpiring) != 0;
  if (watched_locked() && !expiring && decide_locked(Outcome::shut_down)) held_ |= kDeferred;
  unlock();
  return !expiring;
}

void DelayedOperation::unlock() {
  if (lock_.depth() > 1) {
    lock_.unlock();
    return;
  }
  release_last_hold();
}

void DelayedOperation::release_last_hold() {
  const std::uint8_t held = held_;
  held_ = static_cast<std::uint8_t>(held & ~(kDeferred | kErrorsHeld));
  lock_.unlock();
  PURGATORY_RACE_POINT("DelayedOperation::unlock: released, before callbacks or notes");
  if ((held & kErrorsHeld) != 0) report_held_errors();
  if ((held & kDeferred) != 0) {
    finish();
  } else if (notes_.load() != 0 && !is_completed()) {
    (void)check(0);  // a check skipped while the lock was held: serve it now
  }
}

bool DelayedOperation::run_try_complete_locked(std::uint8_t reason) noexcept {
  // Notes left before this run are served by it. (Most runs find none: a load, not an exchange.)
  std::uint8_t want = reason;
  if (notes_.load(std::memory_order_relaxed) != 0) want |= notes_.exchange(0);
  bool last_nested_only = false;
  for (;;) {
    if (is_completed()) return false;
    const bool outside =
        (want & kDirectCheck) != 0 || ((want & kWatchCheck) != 0 && watched_locked());
    // A run asked for only by a check nested in the previous run happens once: its own nested
    // checks do not ask for another (bounded; see the header).
    const bool nested = (want & kNestedCheck) != 0 && !last_nested_only;
    if (!outside && !nested) return false;
    last_nested_only = !outside;
    held_ |= kInTryComplete;
    try {
      // True means "complete me"; an operation that completed itself inside is decided already.
      if (try_complete() && !is_completed() && decide_locked(Outcome::completed)) {
        held_ |= kDeferred;
      }
    } catch (...) {
      hold_error(std::current_exception());  // reported once the lock is released
    }
    held_ &= static_cast<std::uint8_t>(~kInTryComplete);
    // Only a holder of the lock decides, and we hold it. A check skipped meanwhile (by another
    // thread, or nested in this try) left a note: honour it before releasing the lock. A note this
    // load misses is served after the release: its writer found the lock held after writing it
    // (sequentially consistent, as the release is), so the load that follows every last release
    // (release_last_hold(), check()) sees it.
    if (is_completed()) return true;
    if (notes_.load(std::memory_order_relaxed) == 0) {
      PURGATORY_RACE_POINT("DelayedOperation::run_try_complete_locked: no note seen, still held");
      return false;
    }
    want = notes_.exchange(0);
    if (want == 0) return false;
  }
}

bool DelayedOperation::safe_try_complete() {
  return check(kDirectCheck);
}

bool DelayedOperation::check(std::uint8_t reason) {
  if (is_completed()) return false;
  if (lock_.held_by_current_thread()) {
    if ((held_ & kInTryComplete) != 0) {
      // Called from inside our own try_complete(): the running one re-checks on its way out.
      notes_.fetch_or(kNestedCheck);
      return false;
    }
    // The caller holds the lock (between lock() and unlock()): its unlock() runs the callbacks.
    return run_try_complete_locked(reason);
  }
  bool retry = false;
  do {
    if (lock_.try_lock()) {
      const bool won = run_try_complete_locked(reason);
      const std::uint8_t held = held_;
      held_ = static_cast<std::uint8_t>(held & ~(kDeferred | kErrorsHeld));
      lock_.unlock();
      if ((held & kErrorsHeld) != 0) report_held_errors();
      if ((held & kDeferred) != 0) finish();
      if (won) return true;
      retry = notes_.load() != 0;
      reason = 0;  // what is left to do is in the notes
    } else {
      PURGATORY_RACE_POINT("DelayedOperation::check: lock busy, before the note");
      // The holder will see the note and check again; if it had released the lock just before
      // we wrote it, nobody would, so try once more ourselves. (With no reason of our own, the
      // note we serve is already there: the holder serves it.)
      const std::uint8_t bit = reason != 0 ? reason : 0;
      retry = bit != 0 && (notes_.fetch_or(bit) & bit) == 0;
    }
  } while (retry && !is_completed());
  return false;
}

bool DelayedOperation::decide_locked(Outcome outcome) noexcept {
  if (is_completed()) return false;
  // Only holders of the lock write decision_: no read-modify-write needed.
  decision_.store(static_cast<std::uint8_t>(decision_.load(std::memory_order_relaxed) |
                                            static_cast<std::uint8_t>(outcome)),
                  std::memory_order_release);
  (void)TimerTask::cancel();  // leave the timing wheel at once, not when its timeout passes
  if (watched_locked()) {
    registry_->unwatch(*this, outcome);  // counts it as finishing until finish() ends
    finish_counted_ = true;
    intrusive_ptr_release(this);  // the watch reference; callers hold their own
  }
  return true;
}

void DelayedOperation::finish() noexcept {
  const Outcome how = outcome();
  // Only this thread touches registry_ and finish_counted_ once the outcome is decided.
  detail::WatchRegistry* const registry = finish_counted_ ? registry_ : nullptr;
  finish_counted_ = false;
  // A callback may destroy the purgatory (its shutdown() does not wait for the callback it runs
  // in): such a shutdown() keeps the registry alive through `running` until finished() is done.
  detail::RunningFinish running;
  if (registry != nullptr) registry->finish_started(running, registry_slot_);
  try {
    on_complete();
  } catch (...) {
    report(std::current_exception(), "on_complete");
  }
  if (how == Outcome::expired) {
    try {
      on_expiration();
    } catch (...) {
      report(std::current_exception(), "on_expiration");
    }
  }
  PURGATORY_RACE_POINT("DelayedOperation::finish: callbacks ran, before the listener");
  if ((signals_.fetch_or(kFinished, std::memory_order_acq_rel) & kListening) != 0) {
    const std::unique_ptr<detail::OutcomeListener> listener = std::move(listener_);
    listener->on_outcome(how);
  }
  registry_ = nullptr;
  if (registry != nullptr) registry->finished(running);
}

void DelayedOperation::listen(std::unique_ptr<detail::OutcomeListener> listener) {
  if (!listener) throw std::invalid_argument("set_outcome_listener: listener is null");
  if ((signals_.fetch_or(kListenerSet) & kListenerSet) != 0) {
    throw std::logic_error("set_outcome_listener: the operation already has a listener");
  }
  listener_ = std::move(listener);
  PURGATORY_RACE_POINT("DelayedOperation::set_outcome_listener: stored, before publishing");
  if ((signals_.fetch_or(kListening, std::memory_order_acq_rel) & kFinished) == 0) {
    return;  // finish() will call it
  }
  const std::unique_ptr<detail::OutcomeListener> now =
      std::move(listener_);  // callbacks already ran
  now->on_outcome(outcome());
}

void DelayedOperation::report(std::exception_ptr error, std::string_view where) noexcept {
  // After the outcome registry_ is only read by the thread that finishes the operation.
  if (registry_) {
    registry_->report_error(*this, error, where);
    return;
  }
  print_error(error, where);
}

void DelayedOperation::hold_error(std::exception_ptr error) noexcept {
  try {
    if (t_held_errors == nullptr) t_held_errors = new std::vector<HeldError>();
    t_held_errors->push_back({this, nullptr, 0, std::move(error)});
  } catch (...) {
    if (t_held_errors != nullptr && t_held_errors->empty()) {
      delete t_held_errors;
      t_held_errors = nullptr;
    }
    // Out of memory: say so here rather than call the error handler under the lock.
    std::fputs("purgatory: out of memory; an exception from try_complete() was dropped\n", stderr);
    return;
  }
  // The registry as it is now, under the lock: after the lock is released the operation may be
  // decided, and then registry_ belongs to the thread that finishes it.
  if (registry_ && watched_locked()) {
    HeldError& held = t_held_errors->back();
    held.registry.reset(registry_);
    held.slot = registry_->hold_error(*this);
  }
  held_ |= kErrorsHeld;
}

void DelayedOperation::report_held_errors() noexcept {
  PURGATORY_RACE_POINT("DelayedOperation::report_held_errors: lock released, before reporting");
  // One at a time, taken out first: the handler may lock this operation again (and its last
  // unlock then reports what that hold added, after the ones kept here before).
  for (;;) {
    std::vector<HeldError>* errors = t_held_errors;
    if (errors == nullptr) return;
    const auto it = std::find_if(errors->begin(), errors->end(),
                                 [this](const HeldError& e) { return e.op == this; });
    if (it == errors->end()) return;
    HeldError held = std::move(*it);
    errors->erase(it);
    if (errors->empty()) {
      delete errors;
      t_held_errors = nullptr;
    }
    if (held.registry) {
      held.registry->report_held_error(*this, held.slot, std::move(held.error), "try_complete");
    } else {
      print_error(held.error, "try_complete");
    }
  }
}

}  // namespace purgatory
