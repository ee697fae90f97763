// Asio-native waits on a SystemTimer: purgatory::async_wait(timer, delay, token) follows Asio's
// completion-token rules, so the same call serves a plain handler, a coroutine and a future.
//
//   purgatory::async_wait(timer, 50ms, [](boost::system::error_code ec) { ... });   // handler
//   co_await purgatory::async_wait(timer, 50ms, boost::asio::use_awaitable);         // coroutine
//   std::future<void> f = purgatory::async_wait(timer, 50ms, boost::asio::use_future);
//
// Completion signature void(boost::system::error_code). The wait is an internal TimerTask on
// `timer`: no error once it ran (never before `delay`, like any task), and
// boost::asio::error::operation_aborted when it was cancelled first, or when the timer closed first
// (close() hands the task back and nothing runs it; the wait completes when the last reference to
// that task is dropped, at once when the caller of close() ignores what it returned). Exactly one
// completion per wait. The handler is posted to its associated executor (never run inside the
// initiating call, nor on the timer's threads), and a pending wait counts as outstanding work of
// that executor: for a handler bound to an io_context (a coroutine's use_awaitable,
// bind_executor(io, ...)), io_context::run() does not return while the wait is pending. A plain
// lambda's associated executor is Asio's system executor: its handler runs on a system-executor
// thread and keeps no io_context busy.
//
// Cancelling. Boost 1.74's Asio has no per-operation cancellation slots (they came in Boost 1.77),
// so a wait takes an optional C++20 std::stop_token before the completion token:
//
//   std::stop_source stop;
//   purgatory::async_wait(timer, 5s, stop.get_token(), handler);
//   stop.request_stop();  // from any thread: the task is cancelled, handler(operation_aborted)
//
// Cancellation is a request, as in Asio: a stop that comes once the task has started running
// changes nothing, and the wait succeeds. A stop requested before the call cancels it at once.
// With Boost >= 1.77, a cancellation slot associated with the handler (bind_cancellation_slot,
// a co_spawn'ed coroutine's cancellation state) cancels it the same way, whatever the type.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (g++ 12, C++20).
#include <utility>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <type_traits>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <boost/version.hpp>
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
// handler(args...) to the handler's associated executor, later calls do nothing. Until then it
// holds outstanding work on that executor. Also owns the operation's cancellation hooks.
// Thread-safe: complete() and abandon() may race from any threads; watch_cancellation() is called
// once, by the initiating call, before anything else can reach this object.
template <class Handler>
class AsyncCompletion {
 public:
  explicit AsyncCompletion(Handler handler)
      : handler_(std::move(handler)),
        work_(boost::asio::make_work_guard(boost::asio::get_associated_executor(handler_))) {}
  AsyncCompletion(const AsyncCompletion&) = delete;
  AsyncCompletion& operator=(const AsyncCompletion&) = delete;
  ~AsyncCompletion() = default;

  // Returns true when this call completed the operation.
  template <class... Args>
  bool complete(Args... args) {
    if (done_.exchange(true, std::memory_order_acq_rel)) return false;
    auto executor = work_.get_executor();
    boost::asio::post(executor, [handler = std::move(handler_),
#if BOOST_VERSION >= 107700
                                 slot = slot_,
#endif
                                 args...]() mutable {
#if BOOST_VERSION >= 107700
      if (slot.is_connected()) slot.clear();  // on the handler's executor, where slots are used
#endif
      std::move(handler)(args...);
    });
    work_.reset();  // the posted handler is outstanding work by itself
    return true;
  }

  // The initiating call failed and throws: the handler must never be called.
  void abandon() noexcept {
    if (!done_.exchange(true, std::memory_order_acq_rel)) work_.reset();
  }

  [[nodiscard]] bool is_done() const noexcept {
    return done_.load(std::memory_order_acquire);
  }

  // Routes cancellation requests, from `stop` and from the handler's cancellation slot (Boost >=
  // 1.77), to cancel(target). Returns whether any can come. `target` owns this object; the
  // requests hold it weakly, so a request after it died does nothing.
  bool watch_cancellation(std::weak_ptr<void> target, void (*cancel)(void*) noexcept,
                          std::stop_token stop) {
    bool cancellable = false;
#if BOOST_VERSION >= 107700
    slot_ = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot_.is_connected()) {
      slot_.assign(CancelRequest{target, cancel});
      cancellable = true;
    }
#endif
    if (stop.stop_possible()) {
      // May call cancel() right here, when the stop was already requested.
      on_stop_.emplace(std::move(stop), CancelRequest{std::move(target), cancel});
      cancellable = true;
    }
    return cancellable;
  }

 private:
  std::atomic<bool> done_{false};
  Handler handler_;  // moved out by the completing call
  boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work_;
#if BOOST_VERSION >= 107700
  boost::asio::associated_cancellation_slot_t<Handler> slot_;
#endif
  // Deregisters from the stop state when this object dies.
  std::optional<std::stop_callback<CancelRequest>> on_stop_;
};

// One async_wait: its completion, and the task it waits for, as far as cancelling needs it.
// Shared by the task, the cancellation requests (weakly) and the initiating call. Thread-safe.
template <class Handler>
class TimerWait {
 public:
  explicit TimerWait(Handler handler) : completion_(std::move(handler)) {}

  AsyncCompletion<Handler>& completion() noexcept { return completion_; }

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
template <class Handler>
class TimerWaitTask final : public TimerTask {
 public:
  explicit TimerWaitTask(std::shared_ptr<TimerWait<Handler>> wait) : wait_(std::move(wait)) {
    wait_->attach(this);
  }
  ~TimerWaitTask() override {
    wait_->detach();
    // Cancelled, handed back by close(), or never added: a no-op when run() completed it.
    wait_->completion().complete(boost::system::error_code(boost::asio::error::operation_aborted));
  }
  TimerWaitTask(const TimerWaitTask&) = delete;
  TimerWaitTask& operator=(const TimerWaitTask&) = delete;

 protected:
  void run() override { wait_->completion().complete(boost::system::error_code()); }

 private:
  std::shared_ptr<TimerWait<Handler>> wait_;
};

struct InitiateTimerWait {
  template <class Handler>
  void operator()(Handler&& handler, SystemTimer* timer, Nanos delay, std::stop_token stop) const {
    using Wait = TimerWait<std::decay_t<Handler>>;
    auto wait = std::make_shared<Wait>(std::forward<Handler>(handler));
    wait->completion().watch_cancellation(wait, &Wait::request_cancel, std::move(stop));
    const boost::intrusive_ptr<TimerWaitTask<std::decay_t<Handler>>> task(
        new TimerWaitTask<std::decay_t<Handler>>(wait));
    try {
      timer->add(task, delay);
    } catch (...) {
      wait->completion().abandon();
      throw;
    }
    PURGATORY_RACE_POINT("async_wait: task added, before marking it scheduled");
    wait->scheduled();
  }
};

}  // namespace detail

// Waits `delay` on `timer`; completion signature void(boost::system::error_code). Throws what
// SystemTimer::add() throws (std::invalid_argument for a bad delay, TimerRejected when the timer
// is closed, draining or full), and then the handler is never called. With a coroutine token
// that happens when the wait is awaited.
template <class CompletionToken>
auto async_wait(SystemTimer& timer, Nanos delay, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
      detail::InitiateTimerWait{}, token, &timer, delay, std::stop_token());
}

// As above; a stop requested on `stop` cancels the wait (see the header comment).
template <class CompletionToken>
auto async_wait(SystemTimer& timer, Nanos delay, std::stop_token stop, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
      detail::InitiateTimerWait{}, token, &timer, delay, std::move(stop));
}

}  // namespace purgatory
