/// @file
/// Asio-native waits on a SystemTimer: purgatory::async_wait(timer, delay, token) follows Asio's
/// completion-token rules, so the same call serves a plain handler, a coroutine and a future.
///
/// @code
///   purgatory::async_wait(timer, 50ms, [](boost::system::error_code ec) { ... });   // handler
///   co_await purgatory::async_wait(timer, 50ms, boost::asio::use_awaitable);         // coroutine
///   std::future<void> f = purgatory::async_wait(timer, 50ms, boost::asio::use_future);
/// @endcode
///
/// Completion signature void(boost::system::error_code). The wait is an internal TimerTask on
/// `timer`: no error once it ran (never before `delay`, like any task), and
/// boost::asio::error::operation_aborted when it was cancelled first, or when the timer closed
/// first (close() hands the task back and nothing runs it; the wait completes when the last
/// reference to that task is dropped, at once when the caller of close() ignores what it returned).
/// Exactly one completion per wait. The handler is posted to its associated executor (never run
/// inside the initiating call, nor on the timer's threads), and a pending wait counts as
/// outstanding work of that executor, from the moment async_wait() accepted it (before it returns)
/// until it completes: for a handler bound to an io_context (a coroutine's use_awaitable,
/// bind_executor(io, ...)), io_context::run() does not return while the wait is pending. A refused
/// wait (see async_wait() below) takes no work, so it leaves that executor as it was. A plain
/// lambda's associated executor is Asio's system executor: its handler runs on a system-executor
/// thread and keeps no io_context busy.
///
/// Cancelling. Boost 1.74's Asio has no per-operation cancellation slots (they came in Boost 1.77),
/// so a wait takes an optional C++20 std::stop_token before the completion token:
///
/// @code
///   std::stop_source stop;
///   purgatory::async_wait(timer, 5s, stop.get_token(), handler);
///   stop.request_stop();  // from any thread: the task is cancelled, handler(operation_aborted)
/// @endcode
///
/// The std::stop_token overloads exist where the standard library has <stop_token> (it defines
/// __cpp_lib_jthread: libstdc++ 10 and later, MSVC; not libc++ 14, which Apple's and LLVM's clang
/// shipped until libc++ 17/18); the rest of this header is the same everywhere.
///
/// Cancellation is a request, as in Asio: a stop that comes once the task has started running
/// changes nothing, and the wait succeeds. A stop requested before the call cancels it at once.
/// With Boost >= 1.77, a cancellation slot associated with the handler (bind_cancellation_slot,
/// a co_spawn'ed coroutine's cancellation state) cancels it the same way, whatever the type.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (g++ 12, C++20).
#include <utility>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#include <boost/version.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif
#if BOOST_VERSION >= 107700
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/cancellation_type.hpp>
#endif

#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory {

namespace detail {

#if defined(__cpp_lib_jthread)
using StopToken = std::stop_token;
#else
// Where the standard library has no <stop_token>: a token that can never be stopped, so that the
// waits' plumbing is the same everywhere (only the public overloads taking one are missing).
struct StopToken {
  [[nodiscard]] bool stop_possible() const noexcept { return false; }
};
#endif

// A cancellation request for an object that may already be gone: calls `fn` on it if it lives.
struct CancelRequest {
  std::weak_ptr<void> target;
  void (*fn)(void* target) noexcept;

  template <class... Ignored>  // Asio's cancellation slots pass a cancellation_type
  void operator()(Ignored&&...) const noexcept {
    if (const std::shared_ptr<void> alive = target.lock()) fn(alive.get());
  }
};

// The handler of one asynchronous operation, completed exactly once: the first complete() posts
// handler(args...) to the handler's associated executor, later calls do nothing. From accepted()
// until then it holds outstanding work on that executor. Also owns the operation's cancellation
// hooks. Thread-safe: complete(), accepted() and abandon() may race from any threads;
// watch_cancellation() is called once, by the initiating call, before anything else can reach
// this object.
template <class Handler>
class AsyncCompletion {
 public:
  explicit AsyncCompletion(Handler handler)
      : handler_(std::move(handler)), executor_(boost::asio::get_associated_executor(handler_)) {}
  AsyncCompletion(const AsyncCompletion&) = delete;
  AsyncCompletion& operator=(const AsyncCompletion&) = delete;
  ~AsyncCompletion() = default;

  // The initiating call accepted the operation: until it completes, it is outstanding work of
  // the handler's executor. Not earlier: work released by a refused call would stop an
  // io_context that has no other work (io_context::run() then returns at once until restart()).
  void accepted() {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!done_.load(std::memory_order_relaxed)) work_.emplace(executor_);
  }

  // Returns true when this call completed the operation.
  template <class... Args>
  bool complete(Args... args) {
    std::optional<Work> work;  // released after the post: the posted handler is work by itself
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (done_.load(std::memory_order_relaxed)) return false;
      done_.store(true, std::memory_order_release);
      if (work_) {
        work.emplace(std::move(*work_));
        work_.reset();
      }
    }
    boost::asio::post(executor_, [handler = std::move(handler_),
#if BOOST_VERSION >= 107700
                                  slot = slot_,
#endif
                                  args...]() mutable {
#if BOOST_VERSION >= 107700
      if (slot.is_connected()) slot.clear();  // on the handler's executor, where slots are used
#endif
      std::move(handler)(args...);
    });
    return true;
  }

  // The initiating call failed and throws: the handler must never be called. Takes no work
  // from the executor (accepted() was not called).
  void abandon() noexcept {
    const std::lock_guard<std::mutex> lock(mu_);
    done_.store(true, std::memory_order_release);
  }

  [[nodiscard]] bool is_done() const noexcept {
    return done_.load(std::memory_order_acquire);
  }

  // Routes cancellation requests, from `stop` and from the handler's cancellation slot (Boost >=
  // 1.77), to cancel(target). Returns whether any can come. `target` owns this object; the
  // requests hold it weakly, so a request after it died does nothing.
  bool watch_cancellation(std::weak_ptr<void> target, void (*cancel)(void*) noexcept,
                          StopToken stop) {
    bool cancellable = false;
#if BOOST_VERSION >= 107700
    slot_ = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot_.is_connected()) {
      slot_.assign(CancelRequest{target, cancel});
      cancellable = true;
    }
#endif
#if defined(__cpp_lib_jthread)
    if (stop.stop_possible()) {
      // May call cancel() right here, when the stop was already requested.
      on_stop_.emplace(std::move(stop), CancelRequest{std::move(target), cancel});
      cancellable = true;
    }
#else
    (void)stop;
    (void)target;
    (void)cancel;
#endif
    return cancellable;
  }

 private:
  using Executor = boost::asio::associated_executor_t<Handler>;
  using Work = boost::asio::executor_work_guard<Executor>;

  std::mutex mu_;                  // orders accepted() against complete() and abandon()
  std::atomic<bool> done_{false};  // written under mu_
  Handler handler_;                // moved out by the completing call
  const Executor executor_;
  std::optional<Work> work_;  // guarded by mu_: from accepted() until the completion
#if BOOST_VERSION >= 107700
  boost::asio::associated_cancellation_slot_t<Handler> slot_;
#endif
#if defined(__cpp_lib_jthread)
  // Deregisters from the stop state when this object dies.
  std::optional<std::stop_callback<CancelRequest>> on_stop_;
#endif
};

// How a wait reports that SystemTimer::add() refused it.
enum class Refusal {
  thrown,  // the initiating call throws; the handler is never called. Signature void(error_code).
  // The handler gets the exception, posted like any completion. Signature
  // void(std::exception_ptr, error_code): the form use_awaitable rethrows at co_await.
  completed,
};

// One async_wait: its completion, and the task it waits for, as far as cancelling needs it.
// Shared by the task, the cancellation requests (weakly) and the initiating call. Thread-safe.
template <class Handler, Refusal R>
class TimerWait {
 public:
  explicit TimerWait(Handler handler) : completion_(std::move(handler)) {}

  AsyncCompletion<Handler>& completion() noexcept { return completion_; }

  // Completes the wait with `ec`, in the form its handler takes. Once only, as complete().
  void finish(boost::system::error_code ec) {
    if constexpr (R == Refusal::completed) {
      completion_.complete(std::exception_ptr(), ec);
    } else {
      completion_.complete(ec);
    }
  }

  // The task is created (attach) and destroyed (detach) around the wait; it completes the wait
  // when it runs, or with operation_aborted when it dies without running.
  void attach(TimerTask* task) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    task_ = task;
  }
  void detach() {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    task_ = nullptr;
  }

  // Whether a cancellation was requested already: a stop requested before the call.
  bool cancel_requested() {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return cancel_requested_;
  }

  // The initiating call added the task: from now on a request cancels it; one that came earlier
  // is honoured here.
  void scheduled() {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    scheduled_ = true;
    if (cancel_requested_ && task_ != nullptr) (void)task_->cancel();
  }

  static void request_cancel(void* self) noexcept {
    auto& wait = *static_cast<TimerWait*>(self);
    // Held across cancel(): the task's destructor, which may run inside it (the timer dropping
    // its last reference) or on another thread, waits here, so task_ is never used once gone.
    // Recursive for the first case. A task whose destructor already started is idle (the timer
    // holds a reference while it is pending), so cancel() returns false without touching it.
    const std::lock_guard<std::recursive_mutex> lock(wait.mu_);
    wait.cancel_requested_ = true;
    if (wait.scheduled_ && wait.task_ != nullptr) (void)wait.task_->cancel();
  }

 private:
  AsyncCompletion<Handler> completion_;
  std::recursive_mutex mu_;
  TimerTask* task_ = nullptr;      // guarded by mu_: the wait's task, while it exists
  bool scheduled_ = false;         // guarded by mu_
  bool cancel_requested_ = false;  // guarded by mu_
};

// The task behind an async_wait: completes it when it runs, or aborted when it dies without
// running. Thread-safe, as TimerTask.
template <class Handler, Refusal R>
class TimerWaitTask final : public TimerTask {
 public:
  explicit TimerWaitTask(std::shared_ptr<TimerWait<Handler, R>> wait) : wait_(std::move(wait)) {
    wait_->attach(this);
  }
  ~TimerWaitTask() override {
    wait_->detach();
    // Cancelled, handed back by close(), refused or never added: a no-op when the wait already
    // completed.
    wait_->finish(boost::system::error_code(boost::asio::error::operation_aborted));
  }
  TimerWaitTask(const TimerWaitTask&) = delete;
  TimerWaitTask& operator=(const TimerWaitTask&) = delete;

 protected:
  void run() override { wait_->finish(boost::system::error_code()); }

 private:
  std::shared_ptr<TimerWait<Handler, R>> wait_;
};

template <Refusal R>
struct InitiateTimerWait {
  template <class Handler>
  void operator()(Handler&& handler, SystemTimer* timer, Nanos delay, StopToken stop) const {
    using Wait = TimerWait<std::decay_t<Handler>, R>;
    auto wait = std::make_shared<Wait>(std::forward<Handler>(handler));
    wait->completion().watch_cancellation(wait, &Wait::request_cancel, std::move(stop));
    const boost::intrusive_ptr<TimerWaitTask<std::decay_t<Handler>, R>> task(
        new TimerWaitTask<std::decay_t<Handler>, R>(wait));
    // A stop requested before the call: never added (with a delay <= 0 the task could run inside
    // add()). Dropping the task completes the wait with operation_aborted.
    if (wait->cancel_requested()) return;
    try {
      timer->add(task, delay);
    } catch (...) {
      if constexpr (R == Refusal::completed) {
        wait->completion().complete(std::current_exception(), boost::system::error_code());
        return;
      } else {
        wait->completion().abandon();
        throw;
      }
    }
    wait->completion().accepted();
    PURGATORY_RACE_POINT("async_wait: task added, before marking it scheduled");
    wait->scheduled();
  }
};

// async_wait() with any token: a refusal throws from the initiating call.
template <class CompletionToken>
auto initiate_timer_wait(CompletionToken&& token, SystemTimer* timer, Nanos delay,
                         StopToken stop) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
      InitiateTimerWait<Refusal::thrown>{}, token, timer, delay, std::move(stop));
}

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
// The coroutine tokens: use_awaitable, and redirect_error(use_awaitable, ec).
template <class Token>
struct AwaitableToken : std::false_type {};
template <class Executor>
struct AwaitableToken<boost::asio::use_awaitable_t<Executor>> : std::true_type {};
template <class Executor>
struct AwaitableToken<boost::asio::redirect_error_t<boost::asio::use_awaitable_t<Executor>>>
    : std::true_type {};

// async_wait() with a coroutine token. Boost 1.74 runs an initiation inside a noexcept
// await_suspend(), where an exception from add() calls std::terminate(). So this initiation never
// throws: a refusal goes to the handler as an exception_ptr, which use_awaitable rethrows at the
// co_await below (the coroutine is resumed on its executor, as for any completion), and so at the
// caller's co_await of this coroutine. An error code is thrown as use_awaitable throws it, or
// stored in `redirect` as redirect_error does.
template <class Executor>
boost::asio::awaitable<void, Executor> await_timer_wait(
    SystemTimer* timer, Nanos delay, StopToken stop,
    boost::asio::use_awaitable_t<Executor> token, boost::system::error_code* redirect) {
  const boost::system::error_code ec =
      co_await boost::asio::async_initiate<boost::asio::use_awaitable_t<Executor>,
                                           void(std::exception_ptr, boost::system::error_code)>(
          InitiateTimerWait<Refusal::completed>{}, token, timer, delay, std::move(stop));
  if (redirect != nullptr) {
    *redirect = ec;
  } else if (ec) {
    throw boost::system::system_error(ec);
  }
}

template <class Executor>
auto await_timer_wait(SystemTimer* timer, Nanos delay, StopToken stop,
                      boost::asio::use_awaitable_t<Executor> token) {
  return await_timer_wait(timer, delay, std::move(stop), token, nullptr);
}

template <class Executor>
auto await_timer_wait(SystemTimer* timer, Nanos delay, StopToken stop,
                      boost::asio::redirect_error_t<boost::asio::use_awaitable_t<Executor>> token) {
  return await_timer_wait(timer, delay, std::move(stop), token.token_, &token.ec_);
}
#endif

// async_wait(), whichever the token.
template <class CompletionToken>
auto dispatch_timer_wait(SystemTimer& timer, Nanos delay, StopToken stop,
                         CompletionToken&& token) {
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
  if constexpr (AwaitableToken<std::decay_t<CompletionToken>>::value) {
    return await_timer_wait(&timer, delay, std::move(stop), token);
  } else {
    return initiate_timer_wait(std::forward<CompletionToken>(token), &timer, delay,
                               std::move(stop));
  }
#else
  return initiate_timer_wait(std::forward<CompletionToken>(token), &timer, delay, std::move(stop));
#endif
}

}  // namespace detail

/// Waits `delay` on `timer`; completion signature void(boost::system::error_code); a stop requested
/// on `stop` cancels the wait (see the header comment). Throws what SystemTimer::add() throws
/// (std::invalid_argument for a bad delay, TimerRejected when the timer is closed, draining or
/// full), and then the handler is never called and its executor is left as it was (an io_context
/// with no other work is not stopped). With a coroutine token, use_awaitable or
/// redirect_error(use_awaitable, ec) (error codes go to ec; exceptions are still thrown), that
/// happens when the wait is awaited: the co_await throws that exception, the coroutine may catch
/// it, and nothing else happens (the coroutine resumes on its executor, as after any completion).
/// Boost 1.74 runs a coroutine token's initiation inside a noexcept function: async_wait() handles
/// these two tokens so that a refusal reaches the co_await; another token built on use_awaitable
/// would meet std::terminate() there.
#if defined(__cpp_lib_jthread)
template <class CompletionToken>
auto async_wait(SystemTimer& timer, Nanos delay, std::stop_token stop, CompletionToken&& token) {
  return detail::dispatch_timer_wait(timer, delay, std::move(stop),
                                     std::forward<CompletionToken>(token));
}
#endif

/// As above, without a stop_token (where the standard library has no <stop_token>, the only form).
template <class CompletionToken>
auto async_wait(SystemTimer& timer, Nanos delay, CompletionToken&& token) {
  return detail::dispatch_timer_wait(timer, delay, detail::StopToken(),
                                     std::forward<CompletionToken>(token));
}

}  // namespace purgatory
