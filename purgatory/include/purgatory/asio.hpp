/// @file
/// The purgatory on Asio: DelayedOperationPurgatory::async_watch(), and everything an Asio server
/// needs in one include (AsioTimer, the purgatory, operations, async_wait()).
///
/// @code
///   boost::asio::io_context io;
///   purgatory::AsioTimer timer(io);                                  // no thread of its own
///   purgatory::DelayedOperationPurgatory<std::string> waits(timer);
///   // in a coroutine:
///   auto op = purgatory::make_operation(5s, [&] { return mailbox.contains(key); });
///   purgatory::Outcome how = co_await waits.async_watch(op, key, boost::asio::use_awaitable);
///   // elsewhere, when a value arrives:
///   waits.check_and_complete(key);
/// @endcode
///
/// async_watch(op, keys, token) is try_complete_else_watch() and a wait for the outcome in one
/// call, for any completion token (a handler, use_awaitable, use_future, deferred). Completion
/// signature void(boost::system::error_code, Outcome): no error and the outcome (completed,
/// expired, shut_down) once the operation ended and its callbacks ran; operation_aborted and
/// Outcome::cancelled when it was cancelled. The handler runs exactly once, posted to its
/// associated executor (never inside async_watch(), nor inline on the thread that completed the
/// operation), and a pending wait is outstanding work of that executor. A handler with no
/// associated executor (a plain lambda) completes, as an Asio I/O object's does, on the
/// purgatory's timer's executor when that timer is an AsioTimer (so on a one-thread io_context,
/// on that thread, before io_context::run() returns), and otherwise on the system executor (a
/// thread of Asio's own). An operation completed by the watch's first try still completes the
/// handler that way.
///
/// Cancelling, as in Asio: emit the cancellation slot associated with the handler (every
/// cancellation type; bind_cancellation_slot, a co_spawn'ed coroutine's cancellation, the
/// awaitable operators). It cancels the operation (DelayedOperation::cancel()): it leaves its
/// keys at once, its on_complete() runs with Outcome::cancelled and the handler gets
/// (operation_aborted, cancelled). An outcome decided first (a check completing it, its timeout
/// firing) wins and reaches the handler instead: exactly one outcome either way.
///
/// Errors: async_watch() throws what try_complete_else_watch() throws (a null operation, no keys,
/// OperationAlreadyWatched, PurgatoryShutDown, std::bad_alloc), and std::logic_error for an
/// operation another wait listens to; the handler is then never called and its executor is left as
/// it was. With use_awaitable (also inside redirect_error() or bind_cancellation_slot()) those
/// are thrown at the co_await instead. Once accepted, the completion allocates nothing with an
/// io_context's executor or the system executor, so an outcome always reaches its handler.
#pragma once

#include <utility>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/detail/outcome_wait.hpp"
#include "purgatory/outcome.hpp"
#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/async.hpp"

namespace purgatory {

template <class Key, class Hash, class KeyEqual>
template <class CompletionToken>
auto DelayedOperationPurgatory<Key, Hash, KeyEqual>::async_watch(const OperationRef& op,
                                                                 std::span<const Key> keys,
                                                                 CompletionToken&& token) {
  return detail::dispatch_outcome<detail::InitiateWatch>(
      std::forward<CompletionToken>(token), this, op,
      detail::WatchKeys<Key>(keys.begin(), keys.end()));
}

}  // namespace purgatory
