/// @file
/// DelayedFuture: Kafka's "complete when all of these futures are done, or time out".
///
/// std::future cannot tell anyone it became ready, so this header brings a minimal Promise /
/// SharedFuture pair whose futures run callbacks when they complete. A DelayedFuture watches a set
/// of them in a DelayedOperationPurgatory (under a key of its own): each future's completion checks
/// the operation, the last one completes it, and the timeout expires it otherwise. The response
/// callback runs once, with the futures and the outcome, on the thread that completed the last
/// future or on the timer's executor.
///
/// @code
///   purgatory::DelayedFuturePurgatory<int> delayed(timer);
///   purgatory::Promise<int> a, b;
///   delayed.try_complete_else_watch(100ms, {a.get_future(), b.get_future()},
///       [](const auto& futures, purgatory::Outcome o) { ... });
///   a.set_value(1); b.set_value(2);  // completes it, on this thread
/// @endcode
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/timer/detail/race_point.hpp"

namespace purgatory {

namespace detail {
template <class T>
struct FutureState {
  std::mutex mu;
  bool done = false;                             // guarded by mu
  std::optional<T> value;                        // guarded by mu; immutable once done
  std::exception_ptr error;                      // guarded by mu; immutable once done
  std::vector<std::function<void()>> callbacks;  // guarded by mu
};
}  // namespace detail

/// The read side. Copyable; thread-safe.
template <class T>
class SharedFuture {
 public:
  /// Whether the promise has been given a value or an exception.
  [[nodiscard]] bool is_done() const {
    const std::lock_guard<std::mutex> lock(state_->mu);
    return state_->done;
  }
  /// The value; rethrows the stored exception. Throws std::logic_error if not done.
  [[nodiscard]] const T& get() const {
    const std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->done) throw std::logic_error("SharedFuture::get: not done");
    if (state_->error) std::rethrow_exception(state_->error);
    return *state_->value;
  }
  /// Runs `callback` once the future is done: at once (on this thread) if it is, else on the
  /// thread that completes it. No lock held while it runs.
  void when_done(std::function<void()> callback) const {
    {
      const std::lock_guard<std::mutex> lock(state_->mu);
      if (!state_->done) {
        state_->callbacks.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

 private:
  template <class>
  friend class Promise;
  explicit SharedFuture(std::shared_ptr<detail::FutureState<T>> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::FutureState<T>> state_;
};

/// The write side. Thread-safe; completing twice throws std::logic_error.
template <class T>
class Promise {
 public:
  Promise() : state_(std::make_shared<detail::FutureState<T>>()) {}
  /// A read side of this promise (any number may be taken).
  [[nodiscard]] SharedFuture<T> get_future() const { return SharedFuture<T>(state_); }
  /// Completes the futures with `value`, then runs their when_done() callbacks on this thread.
  void set_value(T value) {
    complete([&] { state_->value.emplace(std::move(value)); });
  }
  /// Completes the futures with `error` (get() rethrows it), then runs their callbacks here.
  void set_exception(std::exception_ptr error) {
    complete([&] { state_->error = std::move(error); });
  }

 private:
  template <class F>
  void complete(F&& store) {
    std::vector<std::function<void()>> callbacks;
    {
      const std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->done) throw std::logic_error("Promise: already completed");
      store();
      state_->done = true;
      callbacks.swap(state_->callbacks);
    }
    PURGATORY_RACE_POINT("Promise::complete: done, before the callbacks");
    for (auto& callback : callbacks)
      callback();
  }
  std::shared_ptr<detail::FutureState<T>> state_;
};

/// Completes when every future is done; expires after its timeout otherwise. Thread-safe.
template <class T>
class DelayedFuture final : public DelayedOperation {
 public:
  /// The response: called once, with the futures and the outcome.
  using Callback = std::function<void(const std::vector<SharedFuture<T>>&, Outcome)>;

  /// Completes when every one of `futures` is done, or expires `timeout` after it is watched;
  /// then calls `callback`. DelayedFuturePurgatory::try_complete_else_watch() builds and watches
  /// one.
  DelayedFuture(Nanos timeout, std::vector<SharedFuture<T>> futures, Callback callback)
      : DelayedOperation(timeout),
        futures_(std::move(futures)),
        callback_(std::move(callback)),
        link_(std::make_shared<Link>()) {}

  /// The futures waited for.
  [[nodiscard]] const std::vector<SharedFuture<T>>& futures() const noexcept { return futures_; }

 private:
  template <class>
  friend class DelayedFuturePurgatory;

  // Makes each future's completion check this operation, once link_to_futures() has run. The
  // futures reference only a small link, never the operation, so an operation whose futures never
  // complete is still freed. Allocates (so it runs before the watch: one refused leaves only
  // callbacks that find the link empty).
  void check_when_futures_complete() {
    for (const auto& future : futures_) {
      future.when_done([link = link_] {
        OperationRef op;
        {
          const std::lock_guard<std::mutex> lock(link->mu);
          op = OperationRef(
              link->op);  // alive: on_complete() clears the link before the last reference goes
        }
        PURGATORY_RACE_POINT("DelayedFuture: took the operation from its link, before checking");
        if (op) op->safe_try_complete();
      });
    }
  }

  // Only for watched operations: their on_complete() (which clears the link) always runs, while a
  // reference taken through the link keeps them alive. A future completed before the link was
  // set found no operation to check: one check here covers it.
  void link_to_futures() {
    {
      const std::lock_guard<std::mutex> lock(link_->mu);
      if (is_completed()) return;  // on_complete() clears the link, or has already
      link_->op = this;
    }
    (void)safe_try_complete();
  }

  bool try_complete() override {
    for (const auto& future : futures_) {
      if (!future.is_done()) {
        PURGATORY_RACE_POINT("DelayedFuture::try_complete: a future not done, before returning");
        return false;
      }
    }
    return true;
  }
  void on_complete() override {
    {
      const std::lock_guard<std::mutex> lock(link_->mu);
      link_->op = nullptr;
    }
    if (callback_) callback_(futures_, outcome());
  }

  struct Link {
    std::mutex mu;
    DelayedOperation* op = nullptr;  // guarded by mu
  };
  const std::vector<SharedFuture<T>> futures_;
  const Callback callback_;
  const std::shared_ptr<Link> link_;
};

/// Kafka's DelayedFuturePurgatory. Thread-safe.
template <class T>
class DelayedFuturePurgatory {
 public:
  /// A purgatory on `timer`, which must outlive it (not closed by shutdown()).
  explicit DelayedFuturePurgatory(SystemTimer& timer, PurgatoryOptions options = default_options())
      : purgatory_(timer, std::move(options)) {}
  /// A purgatory on `timer` (shared, not closed by shutdown()).
  explicit DelayedFuturePurgatory(std::shared_ptr<SystemTimer> timer,
                                  PurgatoryOptions options = default_options())
      : purgatory_(std::move(timer), std::move(options)) {}
  /// A purgatory with its own timer, built from options.timer.
  explicit DelayedFuturePurgatory(PurgatoryOptions options = default_options())
      : purgatory_(std::move(options)) {}

  /// Kafka's tryCompleteElseWatch for futures: an operation that completes when all of `futures`
  /// are done, or expires after `timeout`; `callback` then runs once. Returns the operation;
  /// whether it completed at once is its is_completed(). Throws what
  /// DelayedOperationPurgatory::try_complete_else_watch() throws, or std::bad_alloc: then nothing
  /// is watched and the callback never runs.
  Ref<DelayedFuture<T>> try_complete_else_watch(Nanos timeout, std::vector<SharedFuture<T>> futures,
                                                typename DelayedFuture<T>::Callback callback) {
    auto op = make_operation<DelayedFuture<T>>(timeout, std::move(futures), std::move(callback));
    op->check_when_futures_complete();
    const std::uint64_t key = next_key_.fetch_add(1, std::memory_order_relaxed);
    if (!purgatory_.try_complete_else_watch(op, {key})) op->link_to_futures();
    return op;
  }

  /// Operations waiting now (DelayedOperationPurgatory::num_delayed()).
  [[nodiscard]] std::size_t num_delayed() const noexcept { return purgatory_.num_delayed(); }
  /// DelayedOperationPurgatory::metrics().
  [[nodiscard]] PurgatoryMetrics metrics() const { return purgatory_.metrics(); }
  /// DelayedOperationPurgatory::shutdown(): every waiting operation gets Outcome::shut_down.
  void shutdown() { purgatory_.shutdown(); }

 private:
  static PurgatoryOptions default_options() {
    PurgatoryOptions o;
    o.name = "delayed-future";
    o.shards = 8;
    return o;
  }
  DelayedOperationPurgatory<std::uint64_t> purgatory_;
  std::atomic<std::uint64_t> next_key_{0};
};

}  // namespace purgatory
