// Internal to purgatory/timer/async.hpp: the task and the shared state behind one
// async_wait(), and its initiation for each kind of completion token. Not for users.
#pragma once

#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/detail/async_completion.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory::detail {

// One async_wait: its completion, and the task it waits for, as far as cancelling needs it.
// Shared by the task, the cancellation requests (weakly) and the initiating call. Thread-safe.
template <class Handler, Refusal R>
class TimerWait {
 public:
  TimerWait(Handler handler, CompletionMemory memory, const DefaultExecutor& fallback)
      : completion_(std::move(handler), std::move(memory), fallback) {}

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

// `reserved`: the completion's memory, set aside by a coroutine token's caller (whose initiation
// runs where it must not throw, see await_timer_wait()); null: allocated here.
template <Refusal R>
struct InitiateTimerWait {
  template <class Handler>
  void operator()(Handler&& handler, SystemTimer* timer, Nanos delay, StopToken stop,
                  CompletionMemory* reserved) const {
    using Wait = TimerWait<std::decay_t<Handler>, R>;
    using Task = TimerWaitTask<std::decay_t<Handler>, R>;
    const std::shared_ptr<Wait> wait = make_wait<Wait, R>(std::forward<Handler>(handler), reserved,
                                                          default_completion_executor(*timer));
    if (!wait) return;  // refused out of memory: the handler has the exception
    wait->completion().watch_cancellation(wait, &Wait::request_cancel, std::move(stop));
    Ref<Task> task;
    try {
      task = make_task<Task>(wait);
      // A stop requested before the call: never added. Dropping the task completes the wait with
      // operation_aborted.
      if (wait->cancel_requested()) return;
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
auto initiate_timer_wait(CompletionToken&& token, SystemTimer* timer, Nanos delay, StopToken stop) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
      InitiateTimerWait<Refusal::thrown>{}, token, timer, delay, std::move(stop),
      static_cast<CompletionMemory*>(nullptr));
}

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
// async_wait() with a coroutine token (see AwaitableToken): this initiation never throws; a
// refusal goes to the handler as an exception_ptr, which use_awaitable rethrows at the co_await
// below (the coroutine resumed on its executor, as for any completion), and so at the caller's
// co_await of this coroutine. An error code is thrown as use_awaitable throws it, or stored in
// `redirect` as redirect_error does.
template <class Executor, class Inner>
boost::asio::awaitable<void, Executor> await_timer_wait(SystemTimer* timer, Nanos delay,
                                                        StopToken stop, Inner token,
                                                        boost::system::error_code* redirect) {
  // Allocated here, where running out of memory throws at the caller's co_await: the initiation
  // below then needs no memory it has not got to report a refusal.
  CompletionMemory memory;
  const boost::system::error_code ec =
      co_await boost::asio::async_initiate<Inner,
                                           void(std::exception_ptr, boost::system::error_code)>(
          InitiateTimerWait<Refusal::completed>{}, token, timer, delay, std::move(stop), &memory);
  if (redirect != nullptr) {
    *redirect = ec;
  } else if (ec) {
    throw boost::system::system_error(ec);
  }
}
#endif

// async_wait(), whichever the token.
template <class CompletionToken>
auto dispatch_timer_wait(SystemTimer& timer, Nanos delay, StopToken stop, CompletionToken&& token) {
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
  using Coroutine = AwaitableToken<std::decay_t<CompletionToken>>;
  if constexpr (Coroutine::value) {
    return await_timer_wait<typename Coroutine::executor_type>(
        &timer, delay, std::move(stop), Coroutine::inner(token), Coroutine::redirect(token));
  } else {
    return initiate_timer_wait(std::forward<CompletionToken>(token), &timer, delay,
                               std::move(stop));
  }
#else
  return initiate_timer_wait(std::forward<CompletionToken>(token), &timer, delay, std::move(stop));
#endif
}

}  // namespace purgatory::detail
