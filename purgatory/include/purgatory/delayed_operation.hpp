/// @file
/// DelayedOperation: a request that waits until a condition holds or its timeout passes.
///
/// @code
///   // A condition and a timeout are enough; the outcome goes to whoever waits (async_watch()).
///   auto op = purgatory::make_operation(500ms, [&] { return log.bytes_after(offset) >= 1000; });
///
///   // Or a class, as Kafka writes them:
///   class DelayedFetch : public purgatory::DelayedOperation {
///    public:
///     explicit DelayedFetch(Request r) : DelayedOperation(r.max_wait), request_(std::move(r)) {}
///    protected:
///     bool try_complete() override { return bytes_ready(request_) >= request_.min_bytes; }
///     void on_complete() override { respond(request_, outcome()); }
///    private:
///     Request request_;
///   };
///   auto fetch = purgatory::make_operation<DelayedFetch>(std::move(request));
/// @endcode
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

#include "purgatory/detail/operation_lock.hpp"
#include "purgatory/detail/watch_registry.hpp"
#include "purgatory/export.hpp"
#include "purgatory/outcome.hpp"
#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/detail/task_pool.hpp"
#include "purgatory/timer/ref.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory {

namespace detail {
// Told once, after the callbacks, how an operation ended (the Asio adapter's hook).
class PURGATORY_EXPORT OutcomeListener {
 public:
  OutcomeListener() = default;
  OutcomeListener(const OutcomeListener&) = delete;
  OutcomeListener& operator=(const OutcomeListener&) = delete;
  virtual ~OutcomeListener() = default;
  // Called once, with no lock held, on the thread that ran the operation's callbacks.
  virtual void on_outcome(Outcome outcome) noexcept = 0;
};
}  // namespace detail

/// Kafka's DelayedOperation: a request that waits, watched on keys by a DelayedOperationPurgatory,
/// until try_complete() finds it can complete, someone completes or cancels it, or its timeout
/// (measured from the watch) passes. It ends with exactly one outcome, decided under the
/// operation's own lock, and on_complete() runs exactly once, after the lock is released.
///
/// Callbacks: try_complete() runs under the operation's lock, never concurrently with itself and
/// only while pending; it may call force_complete() on this operation and check_and_complete() on
/// any purgatory, must not block, and must not complete *another* operation. on_complete() and
/// on_expiration() run with no lock of the operation or the purgatory held: they may call anything.
/// An exception escaping a callback goes to the purgatory's error handler (stderr when unwatched);
/// from try_complete() it counts as "not yet".
///
/// Thread-safe: every public member may be called from any thread, by a holder of a Ref to it.
/// Make one with make_operation(); it is freed when the last Ref goes.
class PURGATORY_EXPORT DelayedOperation : private TimerTask, private detail::WatchNode {
 public:
  /// `timeout` is measured from the moment a purgatory starts watching the operation.
  explicit DelayedOperation(Nanos timeout) noexcept : timeout_(timeout) {}
  ~DelayedOperation() override;

  /// Completes the operation unless it already has an outcome. Exactly one caller across all
  /// threads (and the expiry) wins and gets true; on_complete() has run when it returns, except
  /// when the caller holds the operation's lock (inside try_complete(), or between lock() and
  /// unlock()): then it runs when that lock is released.
  bool force_complete();

  /// Withdraws the operation: unless an outcome is decided already (or its expiry has begun),
  /// decides Outcome::cancelled, which takes it off every key and cancels its timeout, runs
  /// on_complete() (when, as for force_complete()) and returns true; false otherwise. Watched or
  /// not.
  bool cancel();

  /// Kafka's safeTryComplete: runs try_complete() under the lock. If another thread holds the
  /// lock it does not wait: it leaves a note that makes the holder check again before releasing,
  /// so no check is lost and no checker blocks. Returns whether this call decided the outcome.
  bool safe_try_complete();

  /// Whether the outcome is decided (outcome() is not Outcome::pending).
  [[nodiscard]] bool is_completed() const noexcept { return outcome() != Outcome::pending; }
  /// The outcome: pending until decided, then it never changes. Decided does not mean that the
  /// callbacks have run yet (see force_complete()).
  [[nodiscard]] Outcome outcome() const noexcept {
    return static_cast<Outcome>(decision_.load(std::memory_order_acquire) & kOutcomeBits);
  }
  /// The timeout given at construction.
  [[nodiscard]] Nanos timeout() const noexcept { return timeout_; }
  /// True once a purgatory accepted it (an operation is watched at most once).
  [[nodiscard]] bool was_watched() const noexcept {
    return (decision_.load(std::memory_order_acquire) & kClaimed) != 0;
  }

  /// Lockable: the operation's lock, re-entrant. Hold it to change state that try_complete()
  /// reads. The last unlock() reports what try_complete() threw meanwhile, runs the callbacks of
  /// a completion decided meanwhile and retries a check skipped because the lock was held.
  void lock() { lock_.lock(); }
  /// Takes the lock if no other thread holds it (re-entrant, as lock()); returns whether it did.
  bool try_lock() { return lock_.try_lock(); }
  /// Releases the lock once; the last unlock() does what lock() describes.
  void unlock();
  /// Whether the calling thread holds the lock.
  [[nodiscard]] bool lock_held_by_current_thread() const noexcept {
    return lock_.held_by_current_thread();
  }

  /// References held, the purgatory's and the timer's included. For tests and diagnostics.
  [[nodiscard]] std::uint32_t use_count() const noexcept { return TimerTask::use_count(); }

  /// Operations of at most 512 bytes come from the timer's per-thread pool, not from malloc.
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

  /// Ref's hooks.
  friend void intrusive_ptr_add_ref(const DelayedOperation* op) noexcept {
    intrusive_ptr_add_ref(static_cast<const TimerTask*>(op));
  }
  /// Drops a reference; the last one deletes the operation.
  friend void intrusive_ptr_release(const DelayedOperation* op) noexcept {
    intrusive_ptr_release(static_cast<const TimerTask*>(op));
  }

 protected:
  /// Whether the operation can complete now; when it returns true, the operation completes (as
  /// if it called force_complete()). Runs under the lock, only while pending.
  virtual bool try_complete() = 0;
  /// Runs exactly once, whatever the outcome (outcome() tells which). No lock held. Does nothing
  /// unless overridden.
  virtual void on_complete() {}
  /// Runs once, after on_complete(), when the timeout won. No lock held.
  virtual void on_expiration() {}

 private:
  friend struct detail::OperationAccess;

  // Keys whose watch node lives inside the operation; watching more allocates one block.
  static constexpr std::uint32_t kInlineKeys = 1;
  // The bits of each word, and the protocol between them: delayed_operation.cpp.
  static constexpr std::uint8_t kOutcomeBits = 7;
  static constexpr std::uint8_t kClaimed = 8;
  static_assert(static_cast<std::uint8_t>(Outcome::cancelled) <= kOutcomeBits);
  static constexpr std::uint8_t kDirectCheck = 1;
  static constexpr std::uint8_t kWatchCheck = 2;
  static constexpr std::uint8_t kNestedCheck = 4;
  static constexpr std::uint8_t kExpiring = 1;
  static constexpr std::uint8_t kListenerSet = 2;
  static constexpr std::uint8_t kListening = 4;
  static constexpr std::uint8_t kFinished = 8;
  static constexpr std::uint8_t kDeferred = 1;
  static constexpr std::uint8_t kInTryComplete = 2;
  static constexpr std::uint8_t kErrorsHeld = 4;
  static constexpr std::uint8_t kWatched = 8;

  void run() final;
  bool complete_with(Outcome outcome, bool only_if_watched = false);
  bool shut_down_unless_expiring();
  bool check(std::uint8_t reason);
  [[nodiscard]] bool watched_locked() const noexcept { return (held_ & kWatched) != 0; }
  bool decide_locked(Outcome outcome) noexcept;
  void release_last_hold();
  void finish() noexcept;
  void listen(std::unique_ptr<detail::OutcomeListener> listener);
  void report(std::exception_ptr error, std::string_view where) noexcept;
  void hold_error(std::exception_ptr error) noexcept;
  void report_held_errors() noexcept;
  bool run_try_complete_locked(std::uint8_t reason) noexcept;

  // (TimerTask, then the first key's WatchNode, come first: 128 bytes in all on x86-64.)
  detail::OperationLock lock_;
  std::atomic<std::uint8_t> decision_{0};  // outcome | kClaimed; written under lock_
  std::atomic<std::uint8_t> notes_{0};     // skipped checks (k*Check bits) the holder must redo
  std::atomic<std::uint8_t> signals_{0};   // kExpiring and the listener's handshake
  std::uint8_t held_ = 0;                  // guarded by lock_
  bool finish_counted_ = false;            // see decide_locked()
  std::uint16_t registry_slot_ = 0;        // guarded by lock_
  const Nanos timeout_;
  static constexpr Nanos kNotWatched{-1};
  std::atomic<Nanos> watched_since_{kNotWatched};      // written under lock_
  detail::WatchRegistry* registry_ = nullptr;          // guarded by lock_ while pending
  detail::ExtraWatchNodes* extra_nodes_ = nullptr;     // guarded by lock_: nodes of keys 2..n
  std::unique_ptr<detail::OutcomeListener> listener_;  // published by signals_
};

/// A reference to an operation: hold one while calling any of its members.
using OperationRef = Ref<DelayedOperation>;

/// A class make_operation<T>() can build: a DelayedOperation.
template <class T>
concept OperationType = std::derived_from<T, DelayedOperation>;

/// A completion condition: callable with no arguments, returning whether the operation can
/// complete now.
template <class F>
concept CompletionCondition =
    std::is_invocable_r_v<bool, std::add_lvalue_reference_t<std::decay_t<F>>>;

/// An on_complete callback of make_operation(): callable with no arguments or with the Outcome.
template <class F>
concept CompletionCallback = std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>> ||
    std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>, Outcome>;

/// An on_expiration callback of make_operation(): callable with no arguments.
template <class F>
concept ExpirationCallback = std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>;

/// Builds an operation of type T (derived from DelayedOperation) from `args`.
template <OperationType T, class... Args>
Ref<T> make_operation(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...));
}

namespace detail {
struct NoCallback {
  void operator()() const noexcept {}
};

// The operation make_operation(timeout, condition, ...) builds: the callables stored inline
// (empty ones take no room).
template <class Cond, class OnComplete, class OnExpiration>
class CallableOperation final : public DelayedOperation {
 public:
  CallableOperation(Nanos timeout, Cond condition, OnComplete on_complete,
                    OnExpiration on_expiration)
      : DelayedOperation(timeout),
        condition_(std::move(condition)),
        on_complete_(std::move(on_complete)),
        on_expiration_(std::move(on_expiration)) {}

 protected:
  bool try_complete() override { return condition_(); }
  void on_complete() override {
    if constexpr (std::is_invocable_v<OnComplete&, Outcome>) {
      on_complete_(outcome());
    } else {
      on_complete_();
    }
  }
  void on_expiration() override { on_expiration_(); }

 private:
  [[no_unique_address]] Cond condition_;
  [[no_unique_address]] OnComplete on_complete_;
  [[no_unique_address]] OnExpiration on_expiration_;
};
}  // namespace detail

/// make_operation(timeout, condition[, on_complete[, on_expiration]]): an operation without a
/// class. It completes when `condition` returns true; on_complete() or on_complete(Outcome) runs
/// once, whatever the outcome; on_expiration() after it when the timeout won.
template <CompletionCondition Cond, CompletionCallback OnComplete = detail::NoCallback,
          ExpirationCallback OnExpiration = detail::NoCallback>
OperationRef make_operation(Nanos timeout, Cond&& condition, OnComplete&& on_complete = {},
                            OnExpiration&& on_expiration = {}) {
  using Op = detail::CallableOperation<std::decay_t<Cond>, std::decay_t<OnComplete>,
                                       std::decay_t<OnExpiration>>;
  return OperationRef(new Op(timeout, std::forward<Cond>(condition),
                             std::forward<OnComplete>(on_complete),
                             std::forward<OnExpiration>(on_expiration)));
}

}  // namespace purgatory
