/// @file
/// Asio integration: wait for a DelayedOperation's outcome with any Asio completion token.
///
/// @code
///   purgatory.try_complete_else_watch(op, {key});
///   Outcome o = co_await purgatory::async_wait_outcome(op, boost::asio::use_awaitable);
///   purgatory::async_wait_outcome(op, [](boost::system::error_code ec, purgatory::Outcome o) {});
///   std::future<Outcome> f = purgatory::async_wait_outcome(op, boost::asio::use_future);
/// @endcode
///
/// Completion signature void(boost::system::error_code, Outcome): no error and the outcome
/// (completed, expired or shut_down) once the operation ended and its callbacks ran; or
/// boost::asio::error::operation_aborted and Outcome::pending when the wait was cancelled first.
/// The handler runs once, posted to its associated executor (never inline in the thread that
/// completed the operation), and a pending wait counts as outstanding work of that executor: for a
/// handler bound to an io_context (a coroutine's use_awaitable, bind_executor(io, ...)),
/// io_context::run() does not return while the operation is awaited. A plain lambda's associated
/// executor is Asio's system executor: its handler runs on a system-executor thread and keeps no
/// io_context busy.
///
/// Cancelling the wait cancels the operation. Boost 1.74's Asio has no cancellation slots (they
/// came in 1.77), so the cancellable form takes a C++20 std::stop_token before the token (where the
/// standard library has `<stop_token>`, as purgatory/timer/async.hpp says); with
/// Boost >= 1.77 a cancellation slot associated with the handler works the same way. A request
/// withdraws the operation from its purgatory exactly as
/// DelayedOperationPurgatory::cancel_for_key() does: its timeout is cancelled, it leaves every key
/// (watched() drops), it counts in metrics().cancelled_total, and no outcome is decided:
/// on_complete() does not run, and the operation stays pending for its owner to drop (or
/// force_complete()): once the handler has (operation_aborted, pending), no purgatory decides its
/// outcome, not even a check of its key already under way on another thread. A request that finds
/// the outcome already decided (completed, or the timeout firing: the timer called its run())
/// changes nothing: the wait then completes with that outcome. A request for an operation that no
/// purgatory watches (not yet, or not any more) only ends the wait. Do not request the stop from
/// inside the operation's own try_complete() (as for cancel_for_key()).
///
/// While a cancellable wait is pending it holds a reference to the operation (so a request can
/// reach it); the reference goes when the wait completes.
///
/// Out of memory. A wait allocates when it starts: async_wait_outcome() then throws
/// std::bad_alloc and the handler is never called (with a coroutine token, the co_await throws it).
/// Its completion allocates nothing, so an operation's outcome always reaches its handler: the
/// memory Asio needs to post the handler is set aside when the wait starts, which covers an
/// io_context's executor (directly, or inside any_io_executor as coroutines have it) and the
/// system executor; a strand or another executor may allocate more, and out of memory there the
/// handler is destroyed uncalled and stderr says so. use_future's own executor allocates when it
/// sets the value: out of memory there the future holds std::future_error (broken_promise) instead,
/// and stderr says so.
#pragma once


#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/detail/operation_access.hpp"
#include "purgatory/outcome.hpp"
#include "purgatory/timer/async.hpp"
#include "purgatory/timer/detail/race_point.hpp"

namespace purgatory {

namespace detail {

enum class Withdrawal {
  withdrawn,    // unwatched, timeout cancelled, no outcome
  not_watched,  // pending, but no purgatory watches it
  deciding,     // its outcome is decided or being decided (the timeout fired): it will arrive
};

// cancel_for_key() for one operation. The caller holds a reference to `op`.
inline Withdrawal withdraw(DelayedOperation& op) {
  const std::lock_guard<DelayedOperation> lock(op);
  if (op.is_completed()) return Withdrawal::deciding;
  if (!OperationAccess::watched(op)) return Withdrawal::not_watched;
  // As cancel_for_key(): an expiry that began decides; any other timeout is withdrawn (a run the
  // timer claimed but has not called yet finds the operation unwatched and does nothing).
  if (OperationAccess::expiring(op)) return Withdrawal::deciding;
  (void)op.cancel();
  OperationAccess::detach(op);
  return Withdrawal::withdrawn;
}

// One async_wait_outcome: the completion, and the operation while a cancellation may need it.
// Thread-safe. R says how a refusal reaches the handler (as for the timer's waits).
template <class Handler, Refusal R = Refusal::thrown>
class OutcomeWait {
 public:
  OutcomeWait(Handler handler, CompletionMemory memory)
      : completion_(std::move(handler), std::move(memory)) {}

  AsyncCompletion<Handler>& completion() noexcept { return completion_; }

  void finish(boost::system::error_code ec, Outcome outcome) {
    bool first = false;
    if constexpr (R == Refusal::completed) {
      first = completion_.complete(std::exception_ptr(), ec, outcome);
    } else {
      first = completion_.complete(ec, outcome);
    }
    if (first) release();
  }

  // Keeps `op` reachable for cancellation requests, unless the wait already completed.
  void hold(const OperationRef& op) {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!completion_.is_done()) op_ = op;
  }
  // Drops that reference (the operation references the wait through its listener: no cycle
  // may outlive the wait).
  void release() {
    OperationRef drop;  // destroyed after mu_ is released: it may be the last reference
    const std::lock_guard<std::mutex> lock(mu_);
    drop = std::move(op_);
  }

  static void request_cancel(void* self) noexcept {
    auto& wait = *static_cast<OutcomeWait*>(self);
    OperationRef op;
    {
      const std::lock_guard<std::mutex> lock(wait.mu_);
      op = wait.op_;
    }
    if (!op) return;  // completed, or not held yet (hold() follows; see async_wait_outcome)
    PURGATORY_RACE_POINT("OutcomeWait::request_cancel: took the operation, before withdrawing");
    if (withdraw(*op) != Withdrawal::deciding) {
      wait.finish(boost::system::error_code(boost::asio::error::operation_aborted),
                  Outcome::pending);
    }
  }

 private:
  AsyncCompletion<Handler> completion_;
  std::mutex mu_;
  OperationRef op_;  // guarded by mu_; set while a cancellation may come and the wait is pending
};

// The operation's single outcome listener, relaying to the wait. Called once, by the operation.
template <class Handler, Refusal R>
class OutcomeRelay final : public OutcomeListener {
 public:
  explicit OutcomeRelay(std::shared_ptr<OutcomeWait<Handler, R>> wait) : wait_(std::move(wait)) {}
  void on_outcome(Outcome outcome) noexcept override {
    wait_->finish(boost::system::error_code(), outcome);
  }

 private:
  std::shared_ptr<OutcomeWait<Handler, R>> wait_;
};

// `reserved`: as for InitiateTimerWait (purgatory/timer/async.hpp).
template <Refusal R>
struct InitiateOutcomeWait {
  template <class Handler>
  void operator()(Handler&& handler, const OperationRef& op, StopToken stop,
                  CompletionMemory* reserved) const {
    using Wait = OutcomeWait<std::decay_t<Handler>, R>;
    const std::shared_ptr<Wait> wait =
        make_wait<Wait, R>(std::forward<Handler>(handler), reserved, Outcome::pending);
    if (!wait) return;  // refused out of memory: the handler has the exception
    try {
      op->set_outcome_listener(std::make_unique<OutcomeRelay<std::decay_t<Handler>, R>>(wait));
    } catch (...) {
      if constexpr (R == Refusal::completed) {
        wait->completion().complete(std::current_exception(), boost::system::error_code(),
                                    Outcome::pending);
        return;
      } else {
        wait->completion().abandon();
        throw;
      }
    }
    wait->completion().accepted();  // outstanding work from here (a refusal leaves none behind)
    // Held before the requests are routed: a stop already requested withdraws it right here.
    wait->hold(op);
    if (!wait->completion().watch_cancellation(wait, &Wait::request_cancel, std::move(stop))) {
      wait->release();  // nothing can cancel it
    }
  }
};

template <class CompletionToken>
auto initiate_outcome_wait(CompletionToken&& token, const OperationRef& op, StopToken stop) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, Outcome)>(
      InitiateOutcomeWait<Refusal::thrown>{}, token, op, std::move(stop),
      static_cast<CompletionMemory*>(nullptr));
}

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
// async_wait_outcome() with a coroutine token (use_awaitable, redirect_error(use_awaitable, ec)).
// As await_timer_wait(): Boost 1.74 runs the initiation inside a noexcept await_suspend(), so this
// one never throws; a refusal (a second wait) reaches the co_await below as an exception_ptr,
// which use_awaitable rethrows, and so the caller's co_await of this coroutine.
template <class Executor>
boost::asio::awaitable<Outcome, Executor> await_outcome(
    OperationRef op, StopToken stop, boost::asio::use_awaitable_t<Executor> token,
    boost::system::error_code* redirect) {
  CompletionMemory memory;  // here, where out of memory throws at the caller's co_await
  const auto [ec, outcome] =
      co_await boost::asio::async_initiate<boost::asio::use_awaitable_t<Executor>,
                                           void(std::exception_ptr, boost::system::error_code,
                                                Outcome)>(InitiateOutcomeWait<Refusal::completed>{},
                                                          token, op, std::move(stop), &memory);
  if (redirect != nullptr) {
    *redirect = ec;
  } else if (ec) {
    throw boost::system::system_error(ec);
  }
  co_return outcome;
}

template <class Executor>
auto await_outcome(const OperationRef& op, StopToken stop,
                   boost::asio::use_awaitable_t<Executor> token) {
  return await_outcome(op, std::move(stop), token, nullptr);
}

template <class Executor>
auto await_outcome(const OperationRef& op, StopToken stop,
                   boost::asio::redirect_error_t<boost::asio::use_awaitable_t<Executor>> token) {
  return await_outcome(op, std::move(stop), token.token_, &token.ec_);
}
#endif

template <class CompletionToken>
auto dispatch_outcome_wait(const OperationRef& op, StopToken stop, CompletionToken&& token) {
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
  if constexpr (AwaitableToken<std::decay_t<CompletionToken>>::value) {
    return await_outcome(op, std::move(stop), token);
  } else {
    return initiate_outcome_wait(std::forward<CompletionToken>(token), op, std::move(stop));
  }
#else
  return initiate_outcome_wait(std::forward<CompletionToken>(token), op, std::move(stop));
#endif
}

}  // namespace detail

/// Waits for `op`'s outcome; completion signature void(boost::system::error_code, Outcome).
/// At most one wait per operation (it takes the operation's single outcome listener): a second
/// throws std::logic_error; a null `op` throws std::invalid_argument; then the handler is never
/// called. Cancellable through the handler's cancellation slot (Boost >= 1.77). With a coroutine
/// token, use_awaitable or redirect_error(use_awaitable, ec), a second wait throws its
/// std::logic_error at the co_await (the coroutine may catch it; nothing else happens), and a
/// null `op` throws from this call, before anything is awaited. Boost 1.74 runs a coroutine
/// token's initiation inside a noexcept function: another token built on use_awaitable would meet
/// std::terminate() there on a second wait.
template <class CompletionToken>
auto async_wait_outcome(const OperationRef& op, CompletionToken&& token) {
  if (!op) throw std::invalid_argument("async_wait_outcome: the operation is null");
  return detail::dispatch_outcome_wait(op, detail::StopToken(),
                                       std::forward<CompletionToken>(token));
}

#if defined(__cpp_lib_jthread)
/// As above; a stop requested on `stop` cancels the wait and withdraws the operation. Where the
/// standard library has `<stop_token>`.
template <class CompletionToken>
auto async_wait_outcome(const OperationRef& op, std::stop_token stop, CompletionToken&& token) {
  if (!op) throw std::invalid_argument("async_wait_outcome: the operation is null");
  return detail::dispatch_outcome_wait(op, std::move(stop), std::forward<CompletionToken>(token));
}
#endif

}  // namespace purgatory
