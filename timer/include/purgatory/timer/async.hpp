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
/// Out of memory: async_wait() throws std::bad_alloc as add() does (with a coroutine token, at the
/// co_await); once accepted, the wait's completion allocates nothing with an io_context's executor
/// (also inside any_io_executor, as coroutines have it) or the system executor (see
/// CompletionMemory below), so it always reaches the handler; a strand or another executor may
/// allocate more, and out of memory there the handler is destroyed uncalled and stderr says so.
/// use_future's executor allocates when it sets the value: out of memory there the future holds
/// std::future_error (broken_promise), and stderr says so.
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
/// The std::stop_token overloads exist where the standard library has `<stop_token>` (it defines
/// __cpp_lib_jthread: libstdc++ 10 and later, MSVC; not libc++ 14, which Apple's and LLVM's clang
/// shipped until libc++ 17/18); the rest of this header is the same everywhere.
///
/// Cancellation is a request, as in Asio: a stop that comes once the task has started running
/// changes nothing, and the wait succeeds. A stop requested before the call cancels it at once.
/// With Boost >= 1.77, a cancellation slot associated with the handler (bind_cancellation_slot,
/// a co_spawn'ed coroutine's cancellation state) cancels it the same way, whatever the type.
#pragma once


#include <atomic>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <tuple>
#include <type_traits>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
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
// Where the standard library has no `<stop_token>`: a token that can never be stopped, so that the
// waits' plumbing is the same everywhere (only the public overloads taking one are missing).
struct StopToken {
  [[nodiscard]] bool stop_possible() const noexcept { return false; }
};
#endif

// Memory for the one post that completes an asynchronous operation, set aside when the operation
// starts: the completion then allocates nothing, so it cannot fail where it runs (an operation's
// outcome listener, a task's destructor, a cancellation request: none may throw). Asio allocates
// the posted operation through the handler's associated allocator when the executor is an
// io_context's (also inside any_io_executor, as coroutines use) or the system executor; a strand
// allocates its own invoker, other executors may allocate elsewhere. Thread-compatible.
class CompletionMemory {
 public:
  // Enough for the posted operation (Asio's op header, the handler, its arguments, the work).
  static constexpr std::size_t kBytes = 512;

  CompletionMemory() : block_(::operator new(kBytes)) {}  // throws std::bad_alloc
  CompletionMemory(CompletionMemory&& other) noexcept
      : block_(std::exchange(other.block_, nullptr)) {}
  CompletionMemory& operator=(CompletionMemory&&) = delete;
  ~CompletionMemory() { ::operator delete(block_); }

  // The block, once, if `bytes` fit; else null.
  void* take(std::size_t bytes) noexcept {
    return bytes <= kBytes ? std::exchange(block_, nullptr) : nullptr;
  }

 private:
  void* block_;
};

// The allocator a completion's post uses: the block set aside, else the heap. Every block goes
// back to the heap (the reserved one came from it).
template <class T>
class CompletionAllocator {
 public:
  using value_type = T;
  explicit CompletionAllocator(CompletionMemory* memory) noexcept : memory_(memory) {}
  template <class U>
  CompletionAllocator(const CompletionAllocator<U>& other) noexcept  // NOLINT: rebinding
      : memory_(other.memory_) {}

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    if (void* block = memory_ != nullptr ? memory_->take(n * sizeof(T)) : nullptr) {
      return static_cast<T*>(block);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p); }

  template <class U>
  friend bool operator==(const CompletionAllocator& a, const CompletionAllocator<U>& b) noexcept {
    return a.memory_ == b.memory_;
  }

 private:
  template <class>
  friend class CompletionAllocator;
  CompletionMemory* memory_;
};

// Posts handler(args...) to `executor` with the memory set aside. An any_io_executor holding an
// io_context's executor is unwrapped: its type-erased post would allocate on the heap.
template <class Executor, class Handler, class... Args>
void post_completion(const Executor& executor, CompletionMemory& memory, Handler&& handler,
                     Args... args) {
  struct Delivery {
    std::decay_t<Handler> handler;
    std::tuple<Args...> args;
    CompletionMemory* memory;

    using allocator_type = CompletionAllocator<void>;
    allocator_type get_allocator() const noexcept { return allocator_type(memory); }
    void operator()() { std::apply(std::move(handler), std::move(args)); }
  };
  Delivery delivery{std::forward<Handler>(handler), std::tuple<Args...>(std::move(args)...),
                    &memory};
  if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>) {
    using IoExecutor = boost::asio::io_context::executor_type;
    if (const IoExecutor* io = executor.template target<IoExecutor>()) {
      boost::asio::post(*io, std::move(delivery));
      return;
    }
  }
  boost::asio::post(executor, std::move(delivery));
}

// Makes the execution context of `handler`'s executor now if it is made on first use (the system
// executor's, for use_future): the completion must not be the first to need it.
template <class Handler>
void prepare_executor(const Handler& handler) {
  const auto executor = boost::asio::get_associated_executor(handler);
  if constexpr (boost::asio::can_query<decltype(executor),
                                       boost::asio::execution::context_t>::value) {
    (void)boost::asio::query(executor, boost::asio::execution::context);
  }
}

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
  // `memory`: what the completion's post will use, set aside by the initiating call.
  AsyncCompletion(Handler handler, CompletionMemory memory)
      : handler_(std::move(handler)),
        executor_(boost::asio::get_associated_executor(handler_)),
        memory_(std::move(memory)) {}
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

  // Returns true when this call completed the operation. Never throws: posting with an executor
  // whose post allocates elsewhere than through the memory set aside (see CompletionMemory) may
  // fail out of memory; the handler is then destroyed uncalled (for use_future, the future then
  // holds std::future_error broken_promise) and the failure printed to stderr.
  template <class... Args>
  bool complete(Args... args) noexcept {
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
    try {
#if BOOST_VERSION >= 107700
      post_completion(
          executor_, memory_,
          [handler = std::move(handler_), slot = slot_](Args... a) mutable {
            if (slot.is_connected()) slot.clear();  // on the handler's executor
            std::move(handler)(a...);
          },
          args...);
#else
      post_completion(executor_, memory_, std::move(handler_), args...);
#endif
    } catch (...) {
      std::fputs(
          "purgatory: posting a completion handler failed (out of memory): the handler is "
          "destroyed without being called\n",
          stderr);
    }
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
  CompletionMemory memory_;   // used by the completing call
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

// Makes a wait's shared state (`Wait`: a TimerWait, or purgatory/asio.hpp's OutcomeWait) owning
// `handler` and the completion's memory: `reserved` (a coroutine token's, see await_timer_wait())
// or allocated here. Out of memory, with Refusal::thrown it throws (the handler untouched, never
// called); with Refusal::completed, whose initiation must not throw, it posts handler(exception,
// error_code(), refusal...) with the memory reserved and returns null.
template <class Wait, Refusal R, class Handler, class... RefusalArgs>
std::shared_ptr<Wait> make_wait(Handler&& handler, CompletionMemory* reserved,
                                RefusalArgs... refusal) {
  CompletionMemory memory = reserved != nullptr ? std::move(*reserved) : CompletionMemory();
  try {
    prepare_executor(handler);
    return std::make_shared<Wait>(std::forward<Handler>(handler), std::move(memory));
  } catch (...) {  // before the handler moved: make_shared allocates first
    if constexpr (R == Refusal::completed) {
      post_completion(boost::asio::get_associated_executor(handler), memory,
                      std::forward<Handler>(handler), std::current_exception(),
                      boost::system::error_code(), refusal...);
      return nullptr;
    } else {
      throw;
    }
  }
}

// One async_wait: its completion, and the task it waits for, as far as cancelling needs it.
// Shared by the task, the cancellation requests (weakly) and the initiating call. Thread-safe.
template <class Handler, Refusal R>
class TimerWait {
 public:
  TimerWait(Handler handler, CompletionMemory memory)
      : completion_(std::move(handler), std::move(memory)) {}

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
    const std::shared_ptr<Wait> wait = make_wait<Wait, R>(std::forward<Handler>(handler), reserved);
    if (!wait) return;  // refused out of memory: the handler has the exception
    wait->completion().watch_cancellation(wait, &Wait::request_cancel, std::move(stop));
    boost::intrusive_ptr<Task> task;
    try {
      task.reset(new Task(wait));
      // A stop requested before the call: never added (with a delay <= 0 the task could run
      // inside add()). Dropping the task completes the wait with operation_aborted.
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
    SystemTimer* timer, Nanos delay, StopToken stop, boost::asio::use_awaitable_t<Executor> token,
    boost::system::error_code* redirect) {
  // Allocated here, where running out of memory throws at the caller's co_await: the initiation
  // below then needs no memory it has not got to report a refusal.
  CompletionMemory memory;
  const boost::system::error_code ec =
      co_await boost::asio::async_initiate<boost::asio::use_awaitable_t<Executor>,
                                           void(std::exception_ptr, boost::system::error_code)>(
          InitiateTimerWait<Refusal::completed>{}, token, timer, delay, std::move(stop), &memory);
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
auto dispatch_timer_wait(SystemTimer& timer, Nanos delay, StopToken stop, CompletionToken&& token) {
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

/// As above, without a stop_token (where the standard library has no `<stop_token>`, the only
/// form).
template <class CompletionToken>
auto async_wait(SystemTimer& timer, Nanos delay, CompletionToken&& token) {
  return detail::dispatch_timer_wait(timer, delay, detail::StopToken(),
                                     std::forward<CompletionToken>(token));
}

}  // namespace purgatory
