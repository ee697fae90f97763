/// @file
/// DelayedOperation: a request that waits until a condition holds or its timeout passes.
///
/// Kafka's DelayedOperation. Write one by deriving (override try_complete(), on_complete() and
/// optionally on_expiration()), or without a subclass with make_operation(timeout, condition,
/// on_complete[, on_expiration]). Hand it to a DelayedOperationPurgatory, which watches it on keys,
/// re-checks it when a key is checked, and schedules its timeout on a SystemTimer (the operation
/// is its own TimerTask: run() is the expiry, cancelled as soon as the operation completes).
///
/// Exactly one outcome per operation (completed, expired or shut_down), decided under the
/// operation's lock, so try_complete() and the completion callbacks never overlap; the expiry
/// takes the lock too (Kafka only closed that race, on its expiry path, in 2025). Around user code:
///   - try_complete() runs with the operation's lock held, never concurrently with itself, and
///     only while the operation is pending. It may call force_complete() on this operation and
///     check_and_complete() on any purgatory (checks never block on an operation's lock); it must
///     not block, nor force_complete() *another* operation (two such calls could deadlock).
///     A check that reaches this operation from inside its own try_complete() (a key it watches,
///     directly or through another operation's try_complete()) makes it run once more after it
///     returns, and only once: a try_complete() that keeps checking its own keys is not re-run
///     forever.
///   - on_complete(), on_expiration() and the outcome listener run with *no* lock of this
///     operation or of the purgatory held, after the lock is released: they may call anything,
///     including check_and_complete() and try_complete_else_watch() of a new operation.
/// Exceptions escaping a callback are caught and reported to the purgatory's error handler (or
/// stderr when not watched); an exception from try_complete() counts as "not complete", and is
/// reported once the operation's lock is released (by the thread that releases it), so that the
/// handler, too, runs with no lock of this operation or of the purgatory held. (Out of memory to
/// keep it until then, it is printed to stderr instead.)
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>

#include <boost/smart_ptr/intrusive_ptr.hpp>

#include "purgatory/detail/watch_registry.hpp"
#include "purgatory/export.hpp"
#include "purgatory/operation_lock.hpp"
#include "purgatory/outcome.hpp"
#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/detail/task_pool.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory {

/// Told once, after the callbacks, how an operation ended. Used by the Asio adapter (asio.hpp).
class PURGATORY_EXPORT OutcomeListener {
 public:
  OutcomeListener() = default;
  OutcomeListener(const OutcomeListener&) = delete;
  OutcomeListener& operator=(const OutcomeListener&) = delete;
  virtual ~OutcomeListener() = default;
  /// Called once, with no lock held, on the thread that ran the operation's callbacks.
  virtual void on_outcome(Outcome outcome) noexcept = 0;
};

/// Kafka's DelayedOperation: a request that waits until a condition holds or its timeout passes.
/// Thread-safe: every public member may be called from any thread. The caller of any member must
/// hold a reference (OperationRef) for the duration of the call. TimerTask::cancel() is the
/// purgatory's business: calling it yourself withdraws the timeout.
/// Memory (x86-64): 128 bytes (two cache lines), which hold the watch of the first key: one lock
/// word, the state in a few bytes, the timeout, the time it was watched, its purgatory, and the
/// timer task. An operation watched on more keys allocates one block of 8 + 32 bytes per further
/// key when watched (from the pool below) and frees it when it stops being watched.
/// Allocated with `new` (as make_operation() does), operations of at most 512 bytes come from the
/// timer's per-thread pool (timer/detail/task_pool.hpp), not from malloc: a server creates them on
/// its request threads and frees them wherever they complete, the pattern glibc's malloc handles
/// worst.
class PURGATORY_EXPORT DelayedOperation : public TimerTask, private detail::WatchNode {
 public:
  /// Keys whose watch lives inside the operation: watching on more allocates one block.
  static constexpr std::uint32_t kInlineKeys = 1;

  /// `timeout` is measured from the moment a purgatory starts watching the operation.
  explicit DelayedOperation(Nanos timeout) noexcept : timeout_(timeout) {}
  ~DelayedOperation() override;

  /// Completes the operation unless it already has an outcome. Exactly one caller across all
  /// threads (and the expiry) wins and gets true; on_complete() has run when it returns, except
  /// when the caller holds the operation's lock (inside try_complete(), or between lock() and
  /// unlock()): then it runs when that lock is released.
  bool force_complete();

  /// Kafka's safeTryComplete: runs try_complete() under the lock. If another thread holds the
  /// lock it does not wait: it leaves a note that makes the holder check again before releasing
  /// (Kafka's tryCompletePending), so no check is lost and no checker blocks. Returns whether this
  /// call decided the outcome. Works on any pending operation, watched or not (a purgatory's own
  /// checks, check_and_complete(), act only on the operations it still watches).
  bool safe_try_complete();

  /// Whether the outcome is decided (outcome() is not Outcome::pending).
  [[nodiscard]] bool is_completed() const noexcept { return outcome() != Outcome::pending; }
  /// The outcome: pending until decided, then never changes. Decided does not mean the callbacks
  /// have run yet (see force_complete()).
  [[nodiscard]] Outcome outcome() const noexcept {
    return static_cast<Outcome>(decision_.load(std::memory_order_acquire) & kOutcomeBits);
  }
  /// The timeout given at construction.
  [[nodiscard]] Nanos timeout() const noexcept { return timeout_; }
  /// True once a purgatory accepted it (try_complete_else_watch() may be called once).
  [[nodiscard]] bool was_watched() const noexcept {
    return (decision_.load(std::memory_order_acquire) & kClaimed) != 0;
  }

  /// Calls `listener` once with the outcome, after on_complete()/on_expiration() ran; at once if
  /// that already happened. At most one listener: a second throws std::logic_error, a null one
  /// std::invalid_argument.
  void set_outcome_listener(std::unique_ptr<OutcomeListener> listener);

  /// Lockable: the operation's lock. Hold it to change state that try_complete() reads. On the
  /// last unlock() the exceptions try_complete() threw meanwhile are reported and a completion
  /// decided meanwhile runs its callbacks (both on this thread), and a check that was skipped
  /// because the lock was held is retried.
  void lock() { lock_.lock(); }
  /// Takes the lock if no other thread holds it (re-entrant, as lock()); returns whether it did.
  bool try_lock() { return lock_.try_lock(); }
  /// Releases the lock once; the last unlock() does what lock() describes.
  void unlock();
  /// Whether the calling thread holds the lock.
  [[nodiscard]] bool lock_held_by_current_thread() const noexcept {
    return lock_.held_by_current_thread();
  }

  /// The pool (see "Memory" above); over-aligned classes get the global aligned allocator. An
  /// operation is freed by the last OperationRef's `delete`, so it must come from `new` (not from
  /// the global operator new, placement new or an allocator).
  static void* operator new(std::size_t size) { return detail::pool_allocate(size); }
  /// Gives the block back to the pool.
  static void operator delete(void* block, std::size_t size) noexcept {
    detail::pool_deallocate(block, size);
  }
  /// Over-aligned operations: the global aligned operator new.
  static void* operator new(std::size_t size, std::align_val_t align) {
    return ::operator new(size, align);
  }
  /// Over-aligned operations: the global aligned operator delete.
  static void operator delete(void* block, std::size_t, std::align_val_t align) noexcept {
    ::operator delete(block, align);  // the sized form needs -fsized-deallocation under clang
  }

 protected:
  /// Checks the completion condition; if it holds, calls force_complete() and returns its result.
  /// Runs under the lock, only while pending.
  virtual bool try_complete() = 0;
  /// Runs exactly once, whoever completes (outcome() tells how). No lock held.
  virtual void on_complete() = 0;
  /// Runs once, after on_complete(), when the timeout won. No lock held.
  virtual void on_expiration() {}

 private:
  friend struct detail::OperationAccess;

  // decision_: the outcome (low bits) and whether a purgatory claimed the operation. Written only
  // under lock_ (so plain stores), read anywhere.
  static constexpr std::uint8_t kOutcomeBits = 3;
  static constexpr std::uint8_t kClaimed = 4;
  static_assert(static_cast<std::uint8_t>(Outcome::shut_down) <= kOutcomeBits);

  // notes_: why try_complete() runs (bits): a caller asked (safe_try_complete(), the watch
  // itself); a purgatory's check of a watched key (void once the operation is no longer watched);
  // a check made from inside this operation's own try_complete() (honoured once, not again for a
  // check made by the run it caused). Set by checkers that found the lock held.
  static constexpr std::uint8_t kDirectCheck = 1;
  static constexpr std::uint8_t kWatchCheck = 2;
  static constexpr std::uint8_t kNestedCheck = 4;

  // signals_: set without the lock, by read-modify-writes. kExpiring: run() was called, the
  // expiry decides, nobody else. The outcome listener: kListenerSet (set_outcome_listener() was
  // called), then kListening (it is stored) and kFinished (the callbacks ran) in either order:
  // whoever sets the second of those two calls it.
  static constexpr std::uint8_t kExpiring = 1;
  static constexpr std::uint8_t kListenerSet = 2;
  static constexpr std::uint8_t kListening = 4;
  static constexpr std::uint8_t kFinished = 8;

  // held_: guarded by lock_. kDeferred: finish() on the last unlock. kInTryComplete: try_complete()
  // is running. kErrorsHeld: report_held_errors() on the last unlock. kWatched: a purgatory
  // watches the operation now (its nodes are allocated, and linked unless being set up).
  static constexpr std::uint8_t kDeferred = 1;
  static constexpr std::uint8_t kInTryComplete = 2;
  static constexpr std::uint8_t kErrorsHeld = 4;
  static constexpr std::uint8_t kWatched = 8;

  // The expiry: the timer calls it when the timeout passes first.
  void run() final;
  // Decides `outcome` unless already decided; the callbacks run on the last unlock. With
  // only_if_watched (the expiry), decides only an operation a purgatory still watches: one
  // withdrawn (cancel_for_key(), a stop request) after the timer claimed the run but before it
  // called run() is its owner's.
  bool complete_with(Outcome outcome, bool only_if_watched = false);
  // shutdown(): decides Outcome::shut_down if a purgatory watches the operation, unless its expiry
  // has begun (run() was called): that expiry decides it, once it has the lock. Returns false
  // only then.
  bool shut_down_unless_expiring();
  // safe_try_complete() for `reason` (kDirectCheck or kWatchCheck).
  bool check(std::uint8_t reason);
  // Requires the lock. Whether a purgatory watches the operation now.
  [[nodiscard]] bool watched_locked() const noexcept { return (held_ & kWatched) != 0; }
  // Requires the lock. Records the outcome, leaves the timer and every watch list.
  bool decide_locked(Outcome outcome) noexcept;
  // Requires the lock, held once: releases it, then does what the hold left to do (reports held
  // errors, runs the callbacks of a completion decided under it, serves skipped checks).
  void release_last_hold();
  // Runs the callbacks and the listener. No lock held.
  void finish() noexcept;
  void report(std::exception_ptr error, std::string_view where) noexcept;
  // Requires the lock. Keeps an exception from try_complete() for report_held_errors().
  void hold_error(std::exception_ptr error) noexcept;
  // After the last unlock, no lock held: reports what hold_error() kept, in order.
  void report_held_errors() noexcept;
  // Requires the lock, not inside try_complete(). Runs try_complete() for `reason` and for the
  // notes left meanwhile; returns whether it decided.
  bool run_try_complete_locked(std::uint8_t reason) noexcept;

  // (TimerTask, then the first key's WatchNode, come first.)
  OperationLock lock_;
  std::atomic<std::uint8_t> decision_{0};  // outcome | kClaimed; written under lock_
  std::atomic<std::uint8_t> notes_{0};     // skipped checks (k*Check bits) the holder must redo
  std::atomic<std::uint8_t> signals_{0};   // kExpiring and the listener's handshake
  std::uint8_t held_ = 0;                  // guarded by lock_
  // Written under lock_ when the outcome is decided; then read (and cleared) by the thread that
  // runs finish(): whether the registry counts it as finishing (until finish() ends).
  bool finish_counted_ = false;
  std::uint16_t registry_slot_ = 0;  // guarded by lock_: the registry's bookkeeping
  const Nanos timeout_;
  // Until a watch commits (a clock never reads negative: a clock at 0 is a time like any other).
  static constexpr Nanos kNotWatched{-1};
  std::atomic<Nanos> watched_since_{kNotWatched};  // written under lock_ (snapshot() reads it)
  // Guarded by lock_ while pending. Not reference counted while watched (the purgatory outlives
  // every operation it watches); finish() keeps it alive when it must (see RunningFinish).
  detail::WatchRegistry* registry_ = nullptr;
  detail::ExtraWatchNodes* extra_nodes_ = nullptr;  // guarded by lock_: the nodes of keys 2..n
  std::unique_ptr<OutcomeListener> listener_;       // published by signals_
};

/// An owning reference to an operation: hold one while calling any of its members.
using OperationRef = boost::intrusive_ptr<DelayedOperation>;

/// A DelayedOperation made of callables: condition() -> bool says whether the operation can
/// complete now; on_complete() or on_complete(Outcome); on_expiration().
template <class Condition, class OnComplete, class OnExpiration>
class CallableOperation final : public DelayedOperation {
 public:
  /// The callables are stored inline (see make_operation()).
  CallableOperation(Nanos timeout, Condition condition, OnComplete on_complete,
                    OnExpiration on_expiration)
      : DelayedOperation(timeout),
        condition_(std::move(condition)),
        on_complete_(std::move(on_complete)),
        on_expiration_(std::move(on_expiration)) {}

 protected:
  bool try_complete() override { return condition_() && force_complete(); }
  void on_complete() override {
    if constexpr (std::is_invocable_v<OnComplete&, Outcome>) {
      on_complete_(outcome());
    } else {
      on_complete_();
    }
  }
  void on_expiration() override { on_expiration_(); }

 private:
  // Empty callables (no captures) take no room.
  [[no_unique_address]] Condition condition_;
  [[no_unique_address]] OnComplete on_complete_;
  [[no_unique_address]] OnExpiration on_expiration_;
};

/// The default on_expiration of make_operation(): does nothing.
struct NoExpirationCallback {
  /// Does nothing.
  void operator()() const noexcept {}
};

/// make_operation(timeout, condition, on_complete[, on_expiration]): the common case, no subclass.
template <class Condition, class OnComplete, class OnExpiration = NoExpirationCallback>
requires std::is_invocable_r_v < bool, std::decay_t<Condition>
& > &&(std::is_invocable_v<std::decay_t<OnComplete>&> ||
       std::is_invocable_v<std::decay_t<OnComplete>&,
                           Outcome>)&&std::is_invocable_v<std::decay_t<OnExpiration>&> OperationRef
    make_operation(Nanos timeout, Condition&& condition, OnComplete&& on_complete,
                   OnExpiration&& on_expiration = {}) {
  using Op = CallableOperation<std::decay_t<Condition>, std::decay_t<OnComplete>,
                               std::decay_t<OnExpiration>>;
  return OperationRef(new Op(timeout, std::forward<Condition>(condition),
                             std::forward<OnComplete>(on_complete),
                             std::forward<OnExpiration>(on_expiration)));
}

}  // namespace purgatory
