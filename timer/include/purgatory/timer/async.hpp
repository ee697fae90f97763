/// @file
/// async_wait(): an Asio-native wait on a SystemTimer, for any completion token.
///
/// @code
///   purgatory::async_wait(timer, 50ms, [](boost::system::error_code ec) { ... });   // handler
///   co_await purgatory::async_wait(timer, 50ms, boost::asio::use_awaitable);         // coroutine
///   std::future<void> f = purgatory::async_wait(timer, 50ms, boost::asio::use_future);
///   auto op = purgatory::async_wait(timer, 50ms, boost::asio::deferred);             // later
/// @endcode
///
/// Completion signature void(boost::system::error_code): no error once the wait's task ran (never
/// before `delay`, as any task), boost::asio::error::operation_aborted when it was cancelled first,
/// or when the timer closed first (the wait then completes when the last reference to its handed
/// back task is dropped). Exactly one completion per wait. The handler is posted to its associated
/// executor, never run inside the initiating call nor on the timer's threads, and a pending wait
/// is outstanding work of that executor (io_context::run() does not return while a wait bound to
/// it is pending). A handler with no associated executor (a plain lambda) completes, as an Asio I/O
/// object's does, on the timer's executor when the timer is an AsioTimer (its io_context's thread),
/// and otherwise on the system executor (a thread of Asio's own). A refused wait takes no work.
///
/// Cancelling, as in Asio: emit the cancellation slot associated with the handler
/// (bind_cancellation_slot, a co_spawn'ed coroutine's cancellation state, parallel_group, the
/// awaitable operators); every cancellation type is supported. Or pass a std::stop_token before
/// the completion token, where the standard library has `<stop_token>`.
/// A request that comes once the task started running changes nothing: the wait succeeds.
///
/// Out of memory: async_wait() throws std::bad_alloc (with use_awaitable, at the co_await). Once
/// accepted, a wait's completion allocates nothing with an io_context's executor or the system
/// executor, so it always reaches its handler; on a strand or another executor a failed post
/// destroys the handler uncalled and says so on stderr (use_future's future then holds
/// std::future_error, broken_promise).
#pragma once

#include <utility>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif

#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/detail/timer_wait.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory {

/// Waits `delay` on `timer`; completion signature void(boost::system::error_code). Throws what
/// SystemTimer::add() throws (std::invalid_argument for a bad delay; TimerRejected when the timer
/// is closed, draining or full); the handler is then never called and its executor is left as it
/// was. With use_awaitable (also inside redirect_error() or bind_cancellation_slot()) that
/// exception is thrown at the co_await instead, where the coroutine may catch it.
template <class CompletionToken>
auto async_wait(SystemTimer& timer, Nanos delay, CompletionToken&& token) {
  return detail::dispatch_timer_wait(timer, delay, detail::StopToken(),
                                     std::forward<CompletionToken>(token));
}

#if defined(__cpp_lib_jthread)
/// As above; a stop requested on `stop` cancels the wait. Where `<stop_token>` exists.
template <class CompletionToken>
auto async_wait(SystemTimer& timer, Nanos delay, std::stop_token stop, CompletionToken&& token) {
  return detail::dispatch_timer_wait(timer, delay, std::move(stop),
                                     std::forward<CompletionToken>(token));
}
#endif

}  // namespace purgatory
