// Internal to purgatory/asio.hpp: the shared state behind one async_watch(), and its initiation
// for each kind of completion token. Not for users.
//
// The operation's outcome listener relays its one outcome to the wait, which posts the handler
// (AsyncCompletion: exactly once, never inline, memory set aside). A cancellation request (the
// handler's cancellation slot) cancels the operation itself: Outcome::cancelled, unless
// an outcome was decided first, which then reaches the handler as it would have anyway. While a
// request may come, the wait holds a reference to the operation; it drops it when it completes
// (the operation references the wait through its listener: no cycle outlives the wait).
#pragma once

#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/detail/operation_access.hpp"
#include "purgatory/errors.hpp"
#include "purgatory/outcome.hpp"
#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/detail/async_completion.hpp"
#include "purgatory/timer/detail/race_point.hpp"

namespace purgatory::detail {

template <class Handler, Refusal R = Refusal::thrown>
class OutcomeWait {
 public:
  OutcomeWait(Handler handler, CompletionMemory memory, const DefaultExecutor& fallback)
      : completion_(std::move(handler), std::move(memory), fallback) {}

  AsyncCompletion<Handler>& completion() noexcept { return completion_; }

  // The operation's outcome: a cancelled one completes the wait with operation_aborted.
  void finish(Outcome outcome) {
    const boost::system::error_code ec =
        outcome == Outcome::cancelled
            ? boost::system::error_code(boost::asio::error::operation_aborted)
            : boost::system::error_code();
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
    if (!op) return;  // completed, or not held yet (hold() comes first; see the initiations)
    PURGATORY_RACE_POINT("OutcomeWait::request_cancel: took the operation, before cancelling");
    try {
      (void)op->cancel();  // the listener brings Outcome::cancelled, or the outcome decided first
    } catch (...) {
      // cancel() throws only what taking the operation's lock throws (std::overflow_error past
      // its depth): the request is then dropped, as a request that came too late.
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
  void on_outcome(Outcome outcome) noexcept override { wait_->finish(outcome); }

 private:
  std::shared_ptr<OutcomeWait<Handler, R>> wait_;
};

// The keys of one async_watch(), copied: a deferred initiation runs after the caller's list died.
template <class Key>
using WatchKeys = std::vector<Key>;

// Refuses a wait whose initiation failed: rethrows (Refusal::thrown) or completes the handler
// with the exception (Refusal::completed, for coroutines).
template <Refusal R, class Wait>
void refuse(Wait& wait) {
  if constexpr (R == Refusal::completed) {
    wait.completion().complete(std::current_exception(), boost::system::error_code(),
                               Outcome::pending);
  } else {
    wait.completion().abandon();
    throw;
  }
}

// `reserved`: the completion's memory, set aside by a coroutine token's caller (see
// await_timer_wait() in purgatory/timer/detail/timer_wait.hpp); null: allocated here.
template <Refusal R>
struct InitiateWatch {
  template <class Handler, class Purgatory, class Key>
  void operator()(Handler&& handler, Purgatory* purgatory, const OperationRef& op,
                  const WatchKeys<Key>& keys, CompletionMemory* reserved) const {
    using Wait = OutcomeWait<std::decay_t<Handler>, R>;
    const std::shared_ptr<Wait> wait =
        make_wait<Wait, R>(std::forward<Handler>(handler), reserved,
                           default_completion_executor(purgatory->timer()), Outcome::pending);
    if (!wait) return;  // refused out of memory: the handler has the exception
    try {
      // Everything that may fail comes before the watch: once watched, the outcome must reach
      // the handler. A request routed here before the watch cancels the operation, which the
      // watch then finds decided (and the listener reports).
      auto relay = std::make_unique<OutcomeRelay<std::decay_t<Handler>, R>>(wait);
      if (op && op->was_watched()) throw OperationAlreadyWatched(purgatory->name());
      if (op && OperationAccess::has_listener(*op)) {
        throw std::logic_error("async_watch: the operation already has an outcome listener");
      }
      wait->hold(op);
      if (!wait->completion().watch_cancellation(wait, &Wait::request_cancel, StopToken())) {
        wait->release();  // nothing can cancel it
      }
      (void)purgatory->try_complete_else_watch(op, std::span<const Key>(keys.data(), keys.size()));
      OperationAccess::listen(*op, std::move(relay));  // at once if it completed already
    } catch (...) {
      wait->release();
      refuse<R>(*wait);
      return;
    }
    wait->completion().accepted();  // outstanding work from here: a refusal leaves none behind
  }
};

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
// With a coroutine token (AwaitableToken): a refusal reaches the co_await below as an
// exception_ptr, which use_awaitable rethrows (as await_timer_wait() does for the timer's waits).
template <class Executor, class Inner, class Initiation, class... Args>
boost::asio::awaitable<Outcome, Executor> await_outcome(Inner token,
                                                        boost::system::error_code* redirect,
                                                        Initiation initiation, Args... args) {
  CompletionMemory memory;  // here, where out of memory throws at the caller's co_await
  const auto [ec, outcome] =
      co_await boost::asio::async_initiate<Inner, void(std::exception_ptr,
                                                       boost::system::error_code, Outcome)>(
          initiation, token, args..., &memory);
  if (redirect != nullptr) {
    *redirect = ec;
  } else if (ec) {
    throw boost::system::system_error(ec);
  }
  co_return outcome;
}
#endif

// Initiates with Initiation<Refusal::thrown> for any token, or for a coroutine token with
// Initiation<Refusal::completed> (see await_outcome()).
template <template <Refusal> class Initiation, class CompletionToken, class... Args>
auto dispatch_outcome(CompletionToken&& token, Args&&... args) {
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
  using Coroutine = AwaitableToken<std::decay_t<CompletionToken>>;
  if constexpr (Coroutine::value) {
    return await_outcome<typename Coroutine::executor_type>(
        Coroutine::inner(token), Coroutine::redirect(token), Initiation<Refusal::completed>{},
        std::forward<Args>(args)...);
  } else
#endif
  {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, Outcome)>(
        Initiation<Refusal::thrown>{}, token, std::forward<Args>(args)...,
        static_cast<CompletionMemory*>(nullptr));
  }
}

}  // namespace purgatory::detail
