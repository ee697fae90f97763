/// @file
/// DelayedOperationPurgatory: Kafka's request purgatory.
///
/// @code
///   purgatory::AsioTimer timer(io);
///   purgatory::DelayedOperationPurgatory<std::string> fetches(timer, {.name = "fetch"});
///
///   // A long-poll: complete once 1000 bytes are there, or after 500 ms with what there is.
///   auto op = purgatory::make_operation(500ms, [&] { return log.bytes_after(offset) >= 1000; });
///   purgatory::Outcome how = co_await fetches.async_watch(op, "orders-0", use_awaitable);
///
///   log.append(batch);
///   fetches.check_and_complete("orders-0");  // completes every operation now satisfiable
/// @endcode
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/detail/purgatory_core.hpp"
#include "purgatory/errors.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "purgatory/purgatory_options.hpp"
#include "purgatory/purgatory_snapshot.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory {

/// Kafka's request purgatory: operations wait here, watched on one or more keys, until a check of
/// one of their keys finds them completable (check_and_complete()), they are completed or
/// cancelled, or their timeout passes on the timer. Every operation it accepts gets exactly one
/// outcome (except those cancel_for_key() hands back to its caller undecided).
///
/// A completed operation leaves every key's watch list at once and a key whose list empties is
/// erased, so memory follows what waits now: there is no purge interval, and no completed
/// operation lingers on its other keys.
///
/// Thread-safe: every member may be called from any thread, including from an operation's
/// callbacks, except shutdown() (and so the destructor) from a task of a timer the purgatory owns.
/// No lock of the purgatory is held while user code runs, except that Hash, KeyEqual and Key's
/// copy constructor run under its shard locks: keep them plain, and do not call the purgatory
/// from them. Errors: std::invalid_argument for a null operation or no keys,
/// OperationAlreadyWatched, PurgatoryShutDown for any call but the getters after shutdown().
/// Out of memory, a call throws std::bad_alloc having watched, checked or withdrawn nothing.
template <class Key, class Hash = std::hash<Key>, class KeyEqual = std::equal_to<Key>>
class DelayedOperationPurgatory {
 public:
  /// A purgatory with a SystemTimer of its own (reaper and executor threads), built from
  /// options.timer and closed by shutdown().
  explicit DelayedOperationPurgatory(PurgatoryOptions options = {})
      : core_(Core::make_timer(options), options, true) {}
  /// A purgatory on `timer` (an AsioTimer, say), which must outlive it; shutdown() leaves it open.
  explicit DelayedOperationPurgatory(SystemTimer& timer, PurgatoryOptions options = {})
      : core_(std::shared_ptr<SystemTimer>(std::shared_ptr<void>(), &timer), options, false) {}
  /// A purgatory sharing `timer`, kept alive by it. Throws std::invalid_argument if null.
  explicit DelayedOperationPurgatory(std::shared_ptr<SystemTimer> timer,
                                     PurgatoryOptions options = {})
      : core_(std::move(timer), options, false) {}
  /// shutdown().
  ~DelayedOperationPurgatory() = default;
  DelayedOperationPurgatory(const DelayedOperationPurgatory&) = delete;
  DelayedOperationPurgatory& operator=(const DelayedOperationPurgatory&) = delete;

  /// Watches `op` on `keys` and completes with its outcome: the one call of an Asio server.
  /// Completion signature void(boost::system::error_code, Outcome), for any completion token
  /// (a handler, use_awaitable, use_future, deferred). Defined in purgatory/asio.hpp: include it to
  /// call this. See there for cancellation and errors.
  template <class CompletionToken>
  auto async_watch(const OperationRef& op, std::span<const Key> keys, CompletionToken&& token);
  /// As above, with the keys listed in place: `async_watch(op, {"orders-0"}, use_awaitable)`.
  template <class CompletionToken>
  auto async_watch(const OperationRef& op, std::initializer_list<Key> keys,
                   CompletionToken&& token) {
    return async_watch(op, std::span<const Key>(keys.begin(), keys.size()),
                       std::forward<CompletionToken>(token));
  }
  /// As above, on one key: `co_await async_watch(op, key, use_awaitable)`.
  template <class CompletionToken>
  auto async_watch(const OperationRef& op, const Key& key, CompletionToken&& token) {
    return async_watch(op, std::span<const Key>(&key, 1), std::forward<CompletionToken>(token));
  }

  /// Kafka's tryCompleteElseWatch: tries to complete `op`; if it cannot, watches it on every key
  /// (once per distinct key), tries again (a completion that became possible meanwhile is not
  /// missed), then schedules its timeout (one <= 0 expires it at the timer's next pass, never
  /// inside this call). Returns whether this call completed it; an operation already completed is
  /// not watched (false). If the timer refuses the timeout (closed, full) the operation expires at
  /// once. When this call throws, nothing of `op` stays behind (no key lists
  /// it, no timeout, no outcome, no callback): the caller still owns it and may retry.
  bool try_complete_else_watch(const OperationRef& op, std::span<const Key> keys) {
    return core_.try_complete_else_watch(op.get(), keys);
  }
  /// As above, with the keys listed in place: `try_complete_else_watch(op, {"orders-0"})`.
  bool try_complete_else_watch(const OperationRef& op, std::initializer_list<Key> keys) {
    return core_.try_complete_else_watch(op.get(), std::span<const Key>(keys.begin(), keys.size()));
  }
  /// As above, on one key.
  bool try_complete_else_watch(const OperationRef& op, const Key& key) {
    return core_.try_complete_else_watch(op.get(), std::span<const Key>(&key, 1));
  }

  /// Kafka's checkAndComplete: tries every operation watched on `key` (never waiting for an
  /// operation's lock, no shard lock held while try_complete() runs); returns how many this call
  /// completed. 0 for a key nobody watches. Operations that stop being watched meanwhile are left.
  std::size_t check_and_complete(const Key& key) { return core_.check_and_complete(key); }

  /// Kafka's cancelForKey: stops watching every operation watched on `key` (on all its keys),
  /// cancels its timeout without deciding an outcome, and hands it back: its fate is the caller's
  /// (typically force_complete()), and no check under way decides it. Operations already decided
  /// or whose expiry began are left. Counted in metrics().cancelled_total. Waits for each
  /// operation's lock: not from try_complete().
  std::vector<OperationRef> cancel_for_key(const Key& key) { return core_.cancel_for_key(key); }

  /// Kafka's PurgatorySize: (operation, key) pairs watched now. A sum of per-shard counts read one
  /// after another: exact while nothing changes, never negative.
  [[nodiscard]] std::size_t watched() const noexcept { return core_.watched(); }
  /// Kafka's NumDelayedOperations: operations waiting now (summed as watched()).
  [[nodiscard]] std::size_t num_delayed() const noexcept { return core_.num_delayed(); }
  /// The gauges, the outcome counters and the waiting-time histogram.
  [[nodiscard]] PurgatoryMetrics metrics() const { return core_.metrics(); }

  /// Stops accepting calls, then gives every waiting operation exactly one outcome: one already
  /// being decided (a check completing it, its expiry begun; with a timer of its own, also every
  /// timeout already due) keeps it, every other gets Outcome::shut_down. Closes the timer if it is
  /// the purgatory's own. Returns once the callbacks of every operation that was waiting have run,
  /// wherever they run, except those on the calling thread (a shutdown() from a callback).
  /// Idempotent. Not while holding an operation's lock, or a lock its callbacks take.
  void shutdown() { core_.shutdown(); }
  /// Whether shutdown() has been called.
  [[nodiscard]] bool is_shut_down() const noexcept { return core_.is_shut_down(); }

  /// The timer the timeouts run on.
  [[nodiscard]] SystemTimer& timer() const noexcept { return core_.timer(); }
  /// PurgatoryOptions::name.
  [[nodiscard]] const std::string& name() const noexcept { return core_.name(); }
  /// PurgatoryOptions::shards rounded up to a power of two.
  [[nodiscard]] std::size_t shard_count() const noexcept { return core_.shard_count(); }

  /// The operations waiting now, per key, within `limits` (purgatory_snapshot.hpp). Holds each
  /// shard lock only to copy (Key's copy constructor is the user code it runs), takes no operation
  /// lock, and costs nothing when not called. Throws what copying throws, having changed nothing.
  [[nodiscard]] PurgatorySnapshot<Key> snapshot(SnapshotLimits limits = {}) const {
    return core_.snapshot(limits);
  }

 private:
  using Core = detail::PurgatoryCore<Key, Hash, KeyEqual>;
  Core core_;
};

}  // namespace purgatory
