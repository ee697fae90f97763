// Internal to the Asio adapters (purgatory/timer/async.hpp, purgatory/asio.hpp): the completion
// of one asynchronous operation, exactly once, with its memory set aside and its cancellation
// hooks. Not for users.
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
#include <utility>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/system/error_code.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif

namespace purgatory::detail {

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
    if (const auto* system = executor.template target<boost::asio::system_executor>()) {
      boost::asio::post(*system, std::move(delivery));
      return;
    }
  }
  boost::asio::post(executor, std::move(delivery));
}

// The executor a completion handler with none of its own is posted to: the timer's io_context (an
// AsioTimer's executor, as an Asio I/O object completes on its own), else the system executor.
using DefaultExecutor = boost::asio::any_io_executor;

// Makes the execution context of `handler`'s executor now if it is made on first use (the system
// executor's, for use_future): the completion must not be the first to need it.
template <class Handler>
void prepare_executor(const Handler& handler, const DefaultExecutor& fallback) {
  const auto executor = boost::asio::get_associated_executor(handler, fallback);
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
// handler(args...) to the handler's associated executor (`fallback` if it has none), later calls
// do nothing. From accepted()
// until then it holds outstanding work on that executor. Also owns the operation's cancellation
// hooks. Thread-safe: complete(), accepted() and abandon() may race from any threads;
// watch_cancellation() is called once, by the initiating call, before anything else can reach
// this object.
template <class Handler>
class AsyncCompletion {
 public:
  // `memory`: what the completion's post will use, set aside by the initiating call.
  AsyncCompletion(Handler handler, CompletionMemory memory, const DefaultExecutor& fallback)
      : handler_(std::move(handler)),
        executor_(boost::asio::get_associated_executor(handler_, fallback)),
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
      post_completion(
          executor_, memory_,
          [handler = std::move(handler_), slot = slot_](Args... a) mutable {
            if (slot.is_connected()) slot.clear();  // on the handler's executor
            std::move(handler)(a...);
          },
          args...);
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

  [[nodiscard]] bool is_done() const noexcept { return done_.load(std::memory_order_acquire); }

  // Routes cancellation requests, from `stop` and from the handler's cancellation slot, to
  // cancel(target). Returns whether any can come. `target` owns this object; the
  // requests hold it weakly, so a request after it died does nothing.
  bool watch_cancellation(std::weak_ptr<void> target, void (*cancel)(void*) noexcept,
                          StopToken stop) {
    bool cancellable = false;
    slot_ = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot_.is_connected()) {
      slot_.assign(CancelRequest{target, cancel});
      cancellable = true;
    }
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
  using Executor = boost::asio::associated_executor_t<Handler, DefaultExecutor>;
  using Work = boost::asio::executor_work_guard<Executor>;

  std::mutex mu_;                  // orders accepted() against complete() and abandon()
  std::atomic<bool> done_{false};  // written under mu_
  Handler handler_;                // moved out by the completing call
  const Executor executor_;
  CompletionMemory memory_;   // used by the completing call
  std::optional<Work> work_;  // guarded by mu_: from accepted() until the completion
  boost::asio::associated_cancellation_slot_t<Handler> slot_;
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
                                const DefaultExecutor& fallback, RefusalArgs... refusal) {
  CompletionMemory memory = reserved != nullptr ? std::move(*reserved) : CompletionMemory();
  try {
    prepare_executor(handler, fallback);
    return std::make_shared<Wait>(std::forward<Handler>(handler), std::move(memory), fallback);
  } catch (...) {  // before the handler moved: make_shared allocates first
    if constexpr (R == Refusal::completed) {
      post_completion(boost::asio::get_associated_executor(handler, fallback), memory,
                      std::forward<Handler>(handler), std::current_exception(),
                      boost::system::error_code(), refusal...);
      return nullptr;
    } else {
      throw;
    }
  }
}

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
// The coroutine tokens: use_awaitable, perhaps inside redirect_error(token, ec) and
// bind_cancellation_slot(slot, token), in any order. Asio runs their initiation once the coroutine
// has suspended, where an exception would escape into the io_context's run() instead of reaching
// the co_await: the waits initiate these with Refusal::completed instead. inner(token) is the token
// async_initiate() then takes (use_awaitable, bound to the slot if there is one), redirect(token)
// where an error code goes instead of being thrown (null: thrown).
template <class Token>
struct AwaitableToken : std::false_type {};
template <class Executor>
struct AwaitableToken<boost::asio::use_awaitable_t<Executor>> : std::true_type {
  using executor_type = Executor;
  static auto inner(boost::asio::use_awaitable_t<Executor> token) { return token; }
  static boost::system::error_code* redirect(const boost::asio::use_awaitable_t<Executor>&) {
    return nullptr;
  }
};
template <class Token>
struct AwaitableToken<boost::asio::redirect_error_t<Token>> : AwaitableToken<Token> {
  static auto inner(boost::asio::redirect_error_t<Token> token) {
    return AwaitableToken<Token>::inner(token.token_);
  }
  static boost::system::error_code* redirect(const boost::asio::redirect_error_t<Token>& token) {
    return &token.ec_;
  }
};
template <class Token, class Slot>
struct AwaitableToken<boost::asio::cancellation_slot_binder<Token, Slot>> : AwaitableToken<Token> {
  static auto inner(boost::asio::cancellation_slot_binder<Token, Slot> token) {
    return boost::asio::bind_cancellation_slot(token.get_cancellation_slot(),
                                               AwaitableToken<Token>::inner(token.get()));
  }
  static boost::system::error_code* redirect(
      const boost::asio::cancellation_slot_binder<Token, Slot>& token) {
    return AwaitableToken<Token>::redirect(token.get());
  }
};
#endif

}  // namespace purgatory::detail
