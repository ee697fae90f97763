// Internal to DelayedOperationPurgatory (purgatory/delayed_operation_purgatory.hpp): the
// sharded key map of watch lists and the watch, check, cancel and shutdown protocols on it. The
// public class forwards to this one; its header states the contracts. Not for users.
//
// Operations wait watched on one or more keys in a key map split over independently locked
// shards. A completed operation leaves every key's list the moment it completes (it owns one
// intrusive node per key and unlinks them all under the shard locks), and a key whose list empties
// is erased: memory follows what waits now, with no purge interval.
//
// A shard looks a key up first in 64 slots indexed by the key's hash, each holding the list last
// found or made there: a watch on a key already watched reads lines written only when a slot
// changes hands, not the map's chain, whose nodes the completing thread writes on every unlink.
// KeyEqual confirms every hit. Key entries come from the timer's per-thread pool, not malloc.
//
// Locks: a shard lock is held only to link, unlink or copy a key's list, never around
// try_complete(), the callbacks or the error handler. The key map runs Hash, KeyEqual and Key's
// copy constructor under it (and under the operation's lock, while watching). Lock order is
// operation, then shard. A key whose list empties is erased without running them (by the address
// of the map's own key), so a completion, an expiry or shutdown() never runs user code here.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/detail/operation_access.hpp"
#include "purgatory/detail/purgatory_state.hpp"
#include "purgatory/errors.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "purgatory/purgatory_options.hpp"
#include "purgatory/purgatory_snapshot.hpp"
#include "purgatory/timer/detail/platform.hpp"
#include "purgatory/timer/detail/pool_allocator.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "purgatory/timer/detail/timer_access.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory::detail {

template <class Key, class Hash, class KeyEqual>
class PurgatoryCore {
 public:
  PurgatoryCore(std::shared_ptr<SystemTimer> timer, const PurgatoryOptions& options,
                bool owns_timer)
      : timer_(std::move(timer)), owns_timer_(owns_timer), timeout_slack_(options.timeout_slack) {
    if (!timer_) throw std::invalid_argument("DelayedOperationPurgatory: the timer is null");
    if (!(options.timeout_slack >= 0.0 && options.timeout_slack <= 1.0)) {
      throw std::invalid_argument("purgatory '" + options.name + "': timeout_slack = " +
                                  std::to_string(options.timeout_slack) + " is outside [0, 1]");
    }
    static_assert(Access::kMaxRegistrySlots >= 65536, "a shard index must fit an operation");
    if (options.shards == 0 || options.shards > 65536) {
      throw std::invalid_argument("purgatory '" + options.name + "': shards = " +
                                  std::to_string(options.shards) + " is outside [1, 65536]");
    }
    const std::size_t count = std::bit_ceil(options.shards);
    mask_ = count - 1;
    shift_ = 64 - std::countr_zero(count);
    shards_ = std::make_unique<Shard[]>(count);
    shutdown_decided_ = std::make_unique<std::uint64_t[]>(count);
    state_ = new State(*this, options.name, options.on_callback_error, timer_->clock(), count);
  }
  ~PurgatoryCore() { shutdown(); }
  PurgatoryCore(const PurgatoryCore&) = delete;
  PurgatoryCore& operator=(const PurgatoryCore&) = delete;

  static std::shared_ptr<SystemTimer> make_timer(const PurgatoryOptions& options) {
    TimerOptions timer_options = options.timer;
    if (timer_options.name == TimerOptions{}.name) timer_options.name = options.name;
    return std::make_shared<SystemTimer>(std::move(timer_options));
  }

  // Kafka's tryCompleteElseWatch: tries to complete `op`; if it cannot, watches it on every key,
  // tries once more (a completion that became possible between the first try and the watch is
  // not missed), and only then schedules its timeout. Returns whether this call completed it.
  // An operation completed before this call is returned false and not watched. A key listed
  // more than once is watched once.
  // If the timer refuses the timeout (closed, or at max_pending) the operation expires at once.
  // Refused: when this call throws (the errors above, or any exception from the timer or from
  // hashing or allocating a key), the operation is not watched and nothing of it stays behind
  // (no key lists it, no timeout is scheduled, was_watched() is false, no outcome is decided and
  // no callback runs because of this call): the caller still owns it and may retry.
  bool try_complete_else_watch(DelayedOperation* op, std::span<const Key> keys) {
    if (op == nullptr) {
      throw std::invalid_argument("try_complete_else_watch: the operation is null");
    }
    if (keys.empty()) {
      throw std::invalid_argument("purgatory '" + state_->name() +
                                  "': try_complete_else_watch: keys is empty (an operation must "
                                  "be watched on at least one key)");
    }
    throw_if_shut_down("try_complete_else_watch");
    if (op->timeout() > SystemTimer::kMaxDelay) {
      throw std::invalid_argument("purgatory '" + state_->name() + "': timeout of " +
                                  std::to_string(op->timeout().count()) +
                                  " ns exceeds SystemTimer::kMaxDelay");
    }
    // A first look; watch() claims it under its lock (a second claim throws there).
    if (op->was_watched()) throw OperationAlreadyWatched(state_->name());
    Watch watched = Watch::watching;
    if (keys.size() <= kFewKeys) {  // the common case: the list on the stack, built in line
      std::array<const Key*, kFewKeys> few;  // the first n are written: no need to zero 16
      const std::size_t n = distinct_few(keys, few.data());
      watched = watch(*op, std::span<const Key* const>(few.data(), n));
    } else {
      const std::vector<const Key*> distinct = distinct_many(keys);
      watched = watch(*op, std::span<const Key* const>(distinct.data(), distinct.size()));
    }
    if (watched == Watch::completed_unwatched) state_->account_unwatched_completion();
    return watched == Watch::completed_unwatched || watched == Watch::completed_watched;
  }
  // Kafka's checkAndComplete: tries every operation watched on `key`; returns how many this call
  // completed (they leave every key at once). 0 for a key nobody watches. No shard lock is held
  // while try_complete() runs, and it never waits for an operation's lock.
  // An operation that stops being watched meanwhile (completed, expired, cancelled, withdrawn)
  // is not completed by this call.
  std::size_t check_and_complete(const Key& key) {
    throw_if_shut_down("check_and_complete");
    Ops ops = copy_watchers(key);
    PURGATORY_RACE_POINT("DelayedOperationPurgatory::check_and_complete: copied, before checks");
    std::size_t completed = 0;
    for (const OperationRef& op : ops) {
      if (Access::check_watched(*op)) ++completed;
    }
    return completed;
  }

  // Kafka's cancelForKey: stops watching every operation watched on `key` (on all its keys) and
  // cancels its timeout, without deciding an outcome, and returns them: the caller now decides
  // their fate (typically force_complete()); this purgatory never completes, expires or shuts
  // down a returned operation, not even through a check already under way on another thread.
  // An operation whose outcome is already decided, or whose expiry already started (the timer
  // has called its run()), is left alone and not returned; one whose timeout its owner withdrew
  // (TimerTask::cancel()) is returned like any other. Counted in metrics().cancelled_total.
  // Waits for each operation's lock, so it must not be called from try_complete().
  std::vector<OperationRef> cancel_for_key(const Key& key) {
    throw_if_shut_down("cancel_for_key");
    Ops ops = copy_watchers(key);
    PURGATORY_RACE_POINT("DelayedOperationPurgatory::cancel_for_key: copied, before locks");
    std::vector<OperationRef> cancelled;
    cancelled.reserve(ops.size());
    for (const OperationRef& op : ops) {
      std::unique_lock<DelayedOperation> lock(*op);
      if (op->is_completed() || Access::registry(*op) != state_.get()) continue;
      if (!Access::watched(*op)) continue;  // already cancelled through another key
      // An expiry already under way keeps its course. Otherwise the timeout is withdrawn here; if
      // it cannot be (its owner withdrew it, or the timer claimed the run but has not called
      // run() yet), there is nothing to withdraw, or the run finds it unwatched and does nothing.
      if (Access::expiring(*op)) continue;
      (void)Access::cancel_timeout(*op);
      Access::detach(*op);
      cancelled.push_back(op);
    }
    return cancelled;
  }

  // Kafka's PurgatorySize: (operation, key) pairs watched now. Like Kafka's, a sum of per-shard
  // counts read one after another: exact while nothing changes; under concurrent watches and
  // completions it may count an operation that left one shard and one that arrived in another
  // after it, so it can exceed the number of pairs that ever existed together (never negative).
  [[nodiscard]] std::size_t watched() const noexcept {
    std::size_t total = 0;
    for (std::size_t i = 0; i <= mask_; ++i) {
      total += shards_[i].watched.load(std::memory_order_relaxed);
      PURGATORY_RACE_POINT("DelayedOperationPurgatory::watched: summed a shard, before the next");
    }
    return total;
  }
  // Kafka's NumDelayedOperations: operations waiting now. A sum over shards, as watched().
  [[nodiscard]] std::size_t num_delayed() const noexcept {
    std::size_t total = 0;
    for (std::size_t i = 0; i <= mask_; ++i) {
      total += shards_[i].delayed.load(std::memory_order_relaxed);
      PURGATORY_RACE_POINT(
          "DelayedOperationPurgatory::num_delayed: summed a shard, before the next");
    }
    return total;
  }
  // The gauges (watched(), num_delayed()), the outcome counters and the waiting-time histogram.
  [[nodiscard]] PurgatoryMetrics metrics() const {
    PurgatoryMetrics m;
    state_->fill(m);
    m.watched = watched();
    m.delayed = num_delayed();
    for (std::size_t i = 0; i <= mask_; ++i) {
      const auto& counts = shards_[i].outcomes;
      m.cancelled_total += counts[static_cast<std::size_t>(Outcome::pending)].load(kRelaxed) +
                           counts[static_cast<std::size_t>(Outcome::cancelled)].load(kRelaxed);
      m.completed_total += counts[static_cast<std::size_t>(Outcome::completed)].load(kRelaxed);
      m.expired_total += counts[static_cast<std::size_t>(Outcome::expired)].load(kRelaxed);
      m.shut_down_total += counts[static_cast<std::size_t>(Outcome::shut_down)].load(kRelaxed);
    }
    return m;
  }

  // Stops accepting calls, then gives every waiting operation exactly one outcome: those whose
  // outcome was already being decided (completed by a check, or expired: the timer has called its
  // run(), even if that run still waits for the operation's lock; with a timer the purgatory
  // owns, also every timeout already due, which close() lets run) keep it, all others complete
  // with Outcome::shut_down (their on_complete() sees it in outcome()). Closes the timer if the
  // purgatory owns it. Returns after the callbacks (and outcome listener, and the error handler
  // for what they threw) of every operation that was waiting when it began have run, wherever
  // they run (those left to an expiry included), except those running on the calling thread (a
  // shutdown() called from a callback or from the error handler).
  // Idempotent: a second call returns at once. Must not be called while holding an operation's
  // lock (from try_complete(), or between lock() and unlock()) or a lock that a callback of this
  // purgatory's operations takes.
  void shutdown() {
    if (state_->shut_down.exchange(true)) return;
    for (std::size_t i = 0; i <= mask_; ++i) {
      const std::lock_guard<detail::AdaptiveMutex> lock(shards_[i].mu);
      shards_[i].closed = true;
    }
    if (owns_timer_) (void)timer_->close();  // lets expiries already due finish first
    for (std::size_t i = 0; i <= mask_; ++i) {
      Shard& shard = shards_[i];
      for (;;) {
        OperationRef op;
        {
          const std::lock_guard<detail::AdaptiveMutex> lock(shard.mu);
          if (shard.entries.empty()) break;
          op = OperationRef(&Access::op_of(shard.entries.begin()->second.nodes.front()));
        }
        PURGATORY_RACE_POINT("DelayedOperationPurgatory::shutdown: found, before completing");
        // Blocks until any other decider (or a refused watch) has unlinked it: the loop always
        // progresses. A refused watch is not decided here: it is not watched when we get its lock.
        // An operation whose expiry began is that expiry's to decide, as soon as it gets the lock
        // we just released: until it has unlinked the operation, the loop finds it again.
        if (!Access::shut_down_unless_expiring(*op)) std::this_thread::yield();
      }
    }
    PURGATORY_RACE_POINT("DelayedOperationPurgatory::shutdown: completed all, before waiting");
    // Nothing is watched any more, so no shard counts another decision: wait for these. (Room
    // made by the constructor: shutdown() allocates nothing, so it cannot fail.)
    std::uint64_t* const decided = shutdown_decided_.get();
    for (std::size_t i = 0; i <= mask_; ++i) {
      const std::lock_guard<detail::AdaptiveMutex> lock(shards_[i].mu);
      for (const Outcome o :
           {Outcome::completed, Outcome::expired, Outcome::shut_down, Outcome::cancelled}) {
        decided[i] += shards_[i].outcomes[static_cast<std::size_t>(o)].load(kRelaxed);
      }
    }
    state_->wait_finished(decided);
  }
  // Whether shutdown() has been called.
  [[nodiscard]] bool is_shut_down() const noexcept { return state_->shut_down.load(); }

  // The timer the timeouts run on (the purgatory's own, or the one it was given).
  [[nodiscard]] SystemTimer& timer() const noexcept { return *timer_; }
  // PurgatoryOptions::name.
  [[nodiscard]] const std::string& name() const noexcept { return state_->name(); }
  // Shards of the key map: PurgatoryOptions::shards rounded up to a power of two.
  [[nodiscard]] std::size_t shard_count() const noexcept { return mask_ + 1; }

  // The operations waiting now, per key, within `limits` (see purgatory_snapshot.hpp). Each shard
  // lock is held only to count and copy: the keys (Key's copy constructor is the one piece of
  // user code run under it), the counts and each listed operation's watched-since, deadline and
  // key count. No operation lock is taken and no callback, Hash or KeyEqual runs. Nothing is
  // recorded on the watch/complete paths for it: when never called it costs nothing.
  // An operation still being set up (linked, its watch not yet committed) is counted in
  // `waiting` but not listed. Works after shutdown() too (then it finds nothing). Throws what
  // allocating the snapshot or copying a key throws, having changed nothing.
  [[nodiscard]] PurgatorySnapshot<Key> snapshot(SnapshotLimits limits = {}) const {
    PurgatorySnapshot<Key> snap;
    snap.keys.reserve(std::min<std::size_t>(limits.max_keys, 1024));
    for (std::size_t i = 0; i <= mask_; ++i) {
      PURGATORY_RACE_POINT("DelayedOperationPurgatory::snapshot: before reading a shard");
      Shard& shard = shards_[i];
      const std::lock_guard<detail::AdaptiveMutex> lock(shard.mu);
      snap.keys_total += shard.entries.size();
      snap.delayed += shard.delayed.load(std::memory_order_relaxed);
      for (auto it = shard.entries.begin();
           it != shard.entries.end() && snap.keys.size() < limits.max_keys; ++it) {
        auto& entry =
            snap.keys.emplace_back(typename PurgatorySnapshot<Key>::KeyEntry{it->first, 0, {}});
        entry.waiting = it->second.nodes.size();
        entry.operations.reserve(std::min(entry.waiting, limits.max_operations_per_key));
        for (detail::WatchNode& node : it->second.nodes) {
          if (entry.operations.size() >= limits.max_operations_per_key) break;
          // Linked here, so not yet unwatched: its nodes and timeout are stable.
          DelayedOperation& op = Access::op_of(node);
          const Nanos since = Access::watched_since_published(op);
          if (since < Nanos::zero()) continue;  // being set up: counted, not listed
          const Nanos timeout = op.timeout();
          entry.operations.push_back(
              {since, since + std::max(timeout, Nanos::zero()), timeout, Access::key_count(op)});
        }
      }
    }
    // Read after every shard: each listed watched_since was read from the clock before it was
    // published, so none is later than this (no negative age).
    snap.now = state_->clock().now();
    // A key's list is in the order operations joined it; watches on several threads may commit
    // their clock reads in another order: the listing goes by watched_since (outside the locks).
    for (auto& entry : snap.keys) {
      std::stable_sort(
          entry.operations.begin(), entry.operations.end(),
          [](const auto& a, const auto& b) { return a.watched_since < b.watched_since; });
    }
    return snap;
  }

 private:
  using Access = detail::OperationAccess;
  static constexpr auto kRelaxed = std::memory_order_relaxed;
  using Ops = boost::container::small_vector<OperationRef, 8>;
  static constexpr std::size_t kMinShrinkBuckets = 1024;
  static constexpr std::size_t kRecentSlots = 64;

  // The key map's Hash and KeyEqual: the user's, and a lookup of the map's own key by its address
  // and the hash it had when linked (OwnKey). unlink() erases a key whose list emptied that way,
  // running no user code: it cannot report an exception (it runs inside completions).
  struct OwnKey {
    const Key* key;
    std::size_t hash;
  };
  struct MapHash {
    using is_transparent = void;
    // "May throw" for a slow Hash too: the map keeps the layout it has with Hash itself.
    static constexpr bool kNoexcept =
        noexcept(Hash{}(std::declval<const Key&>())) && !detail::kSlowHash<Hash>;
    std::size_t operator()(const Key& k) const noexcept(kNoexcept) { return Hash{}(k); }
    std::size_t operator()(const OwnKey& k) const noexcept { return k.hash; }
  };
  struct MapEqual {
    using is_transparent = void;
    bool operator()(const Key& a, const Key& b) const noexcept(noexcept(KeyEqual{}(a, b))) {
      return KeyEqual{}(a, b);
    }
    bool operator()(const OwnKey& a, const Key& b) const noexcept { return a.key == &b; }
    bool operator()(const Key& a, const OwnKey& b) const noexcept { return &a == b.key; }
  };

  struct alignas(64) Shard {
    detail::AdaptiveMutex mu;
    // Entries come from the pool: a key's entry is often made by a watching thread and freed by a
    // completing one (see pool_allocator.hpp).
    std::unordered_map<Key, detail::WatchList, MapHash, MapEqual,
                       detail::PoolAllocator<std::pair<const Key, detail::WatchList>>>
        entries;                          // guarded by mu
    bool closed = false;                  // guarded by mu
    std::atomic<std::size_t> watched{0};  // written under mu
    // Outcomes of the operations whose first key is here, so far, by Outcome (pending: cancelled):
    // metrics(), and shutdown() waits until as many decided ones have finished (PurgatoryState).
    // Counted as the first node is unlinked, under the lock that takes anyway.
    std::array<std::atomic<std::uint64_t>, 5> outcomes{};  // written under mu
    // Operations whose first key is here: counting per shard, under a lock already held, keeps
    // the adding and the completing threads off one shared counter.
    std::atomic<std::size_t> delayed{0};  // written under mu
    // In front of `entries`: by the key's hash, the list last found or made for a key with that
    // slot (null when none, or when that list's entry was erased). A watch on a key already
    // here reads these lines, written only when a slot changes hands, instead of walking the
    // map's chain through nodes the completing thread has just written.
    // Written under mu; atomic so that a watch may read a slot without it, as a prefetch hint.
    std::array<std::atomic<detail::WatchList*>, kRecentSlots> recent{};
  };

  // The part the operations reference (kept alive by them while they are watched).
  class State final : public detail::PurgatoryState {
   public:
    State(PurgatoryCore& owner, std::string name, CallbackErrorHandler on_error, const Clock& clock,
          std::size_t shards)
        : PurgatoryState(std::move(name), std::move(on_error), clock, shards), owner_(&owner) {}

    void unwatch(DelayedOperation& op, Outcome outcome) noexcept override {
      // The outcome is counted in the first key's shard as its node leaves it: shutdown() finds
      // the operation in a list or waits for it.
      if (outcome != Outcome::pending) {
        Access::set_registry_slot(op, detail::list_of(Access::node(op, 0))->shard);
      }
      const std::uint32_t keys = Access::key_count(op);
      for (std::uint32_t i = 0; i < keys; ++i) {
        owner_->unlink(Access::node(op, i), i == 0 ? std::optional(outcome) : std::nullopt);
      }
      Access::free_nodes(op);
      if (outcome != Outcome::pending) record_wait(Access::watched_since(op));
    }

   private:
    PurgatoryCore* owner_;  // valid while any operation is watched (see shutdown)
  };

  void throw_if_shut_down(const char* call) const {
    if (state_->shut_down.load(std::memory_order_relaxed)) {
      throw PurgatoryShutDown(state_->name(), call);
    }
  }

  [[nodiscard]] std::size_t shard_of(const Key& key) const {
    return shard_of_hash(static_cast<std::uint64_t>(Hash{}(key)));
  }
  [[nodiscard]] std::size_t shard_of_hash(std::uint64_t h) const noexcept {
    // Fibonacci hashing: the map's own buckets (and `recent`) use the low bits of the same hash.
    return shift_ >= 64 ? 0 : static_cast<std::size_t>((h * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  // Up to this many keys, try_complete_else_watch() keeps its list of distinct keys on the stack
  // and finds them pairwise (distinct_few()); more are found by hashing (distinct_many()).
  static constexpr std::size_t kFewKeys = 16;

  enum class Watch { watching, completed_unwatched, completed_watched, completed_elsewhere };

  // All under one hold of op's lock: claims it (throws OperationAlreadyWatched if some call
  // did); tries; links one node per key; tries again (a completion that became possible between
  // the first try and the watch is not missed); schedules the timeout. Scheduling under the lock
  // means no completion (whose cancel() also runs under it) can race the timer's add(). Watches
  // nothing if op completes first; on an exception nothing stays linked and op is not claimed.
  // `keys` holds no key twice.
  // `ref` is the caller's reference: the timer's add takes it as is (no temporary reference, whose
  // count would be raised and dropped on every watch).
  Watch watch(DelayedOperation& op, std::span<const Key* const> keys) {
    // Each key's hash once, and its lines asked for before any lock is taken.
    // Not zeroed first (each is written below): value-initialising costs a `rep stos` per watch.
    boost::container::small_vector<std::uint64_t, 8> hashes(keys.size(),
                                                            boost::container::default_init);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      hashes[i] = static_cast<std::uint64_t>(Hash{}(*keys[i]));
      prefetch(hashes[i]);
    }
    const std::lock_guard<DelayedOperation> lock(op);  // its unlock runs a completion's callbacks
    if (!Access::claim_locked(op)) throw OperationAlreadyWatched(state_->name());
    try {
      return watch_claimed(op, keys, std::span<const std::uint64_t>(hashes.data(), hashes.size()));
    } catch (...) {
      Access::unclaim_locked(op);  // refused, not watched: the caller still owns it
      throw;
    }
  }

  // watch(), from the claim on (op's lock held).
  Watch watch_claimed(DelayedOperation& op, std::span<const Key* const> keys,
                      std::span<const std::uint64_t> hashes) {
    if (op.is_completed()) return Watch::completed_elsewhere;
    if (Access::try_complete_locked(op)) return Watch::completed_unwatched;
    Access::begin_watch(op, state_.get(), static_cast<std::uint32_t>(keys.size()));
    try {
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const auto k = static_cast<std::uint32_t>(i);
        link(*keys[i], hashes[i], Access::node(op, k), k == 0);
        PURGATORY_RACE_POINT("DelayedOperationPurgatory::watch: linked a key, before the next");
      }
    } catch (...) {
      unlink_refused(op);
      Access::abort_watch(op);
      throw;
    }
    const Nanos watched_at = state_->clock().now();  // one read: waiting-time metric and deadline
    Access::commit_watch(op, watched_at);
    if (Access::try_complete_locked(op)) return Watch::completed_watched;
    PURGATORY_RACE_POINT("DelayedOperationPurgatory::watch: linked, before the timeout");
    try {
      const Nanos timeout = std::max(op.timeout(), Nanos::zero());
      if (timeout_slack_ == 0.0) {
        TimerAccess::add_at(*timer_, Access::task(op), watched_at + timeout);
      } else {
        TimerAccess::add_at(*timer_, Access::task(op), watched_at + timeout, slack_of(timeout));
      }
    } catch (const TimerRejected&) {
      // No timeout can be enforced: end it now rather than let it wait forever (its callbacks
      // run when the lock is released).
      Access::complete_with(op, state_->shut_down.load() ? Outcome::shut_down : Outcome::expired);
    } catch (...) {
      // Anything else (a bad deadline, out of memory): refused, and nothing stays behind. Checks
      // that found it meanwhile left notes that are void once it is unwatched.
      unlink_refused(op);
      Access::abort_committed_watch(op);
      throw;
    }
    return Watch::watching;
  }

  // Unlinks the nodes of a watch being refused (the operation's lock held, no outcome decided).
  void unlink_refused(DelayedOperation& op) noexcept {
    const std::uint32_t keys = Access::key_count(op);
    for (std::uint32_t i = 0; i < keys; ++i) {
      detail::WatchNode& node = Access::node(op, i);
      if (detail::list_of(node) != nullptr) unlink(node, std::nullopt);
    }
  }

  // The keys, each once (by KeyEqual), in their first order, as pointers into `keys`: for more
  // than kFewKeys of them.
  static std::vector<const Key*> distinct_many(std::span<const Key> keys) {
    struct PtrHash {
      std::size_t operator()(const Key* p) const { return Hash{}(*p); }
    };
    struct PtrEqual {
      bool operator()(const Key* a, const Key* b) const { return KeyEqual{}(*a, *b); }
    };
    std::vector<const Key*> out;
    out.reserve(keys.size());
    std::unordered_set<const Key*, PtrHash, PtrEqual> seen;
    seen.reserve(keys.size());
    for (const Key& k : keys) {
      if (seen.insert(&k).second) out.push_back(&k);
    }
    return out;
  }

  // The keys, each once (by KeyEqual), in their first order, compared pairwise (for up to
  // kFewKeys): pointers into `keys`, written to `out`, which holds keys.size(). Returns how many.
  static std::size_t distinct_few(std::span<const Key> keys, const Key** out) {
    std::size_t n = 0;
    for (const Key& k : keys) {
      if (std::none_of(out, out + n, [&](const Key* p) { return KeyEqual{}(*p, k); })) {
        out[n++] = &k;
      }
    }
    return n;
  }

  // Requires the counter's shard lock: its only writers hold it, so no atomic read-modify-write
  // (a locked instruction) is needed; readers without the lock see whole values.
  template <class T>
  static void bump(std::atomic<T>& counter, int by) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + static_cast<T>(by),
                  std::memory_order_relaxed);
  }

  // `first`: the operation's first node (part of the operation), which carries its count in
  // `delayed`. `h`: the key's hash.
  void link(const Key& key, std::uint64_t h, detail::WatchNode& node, bool first) {
    const std::size_t index = shard_of_hash(h);
    Shard& shard = shards_[index];
    const std::lock_guard<detail::AdaptiveMutex> lock(shard.mu);
    if (shard.closed) throw PurgatoryShutDown(state_->name(), "try_complete_else_watch");
    const auto recent_slot = static_cast<std::uint32_t>(h & (kRecentSlots - 1));
    std::atomic<detail::WatchList*>& slot = shard.recent[recent_slot];
    detail::WatchList* recent = slot.load(std::memory_order_relaxed);
    if (recent == nullptr || !KeyEqual{}(*static_cast<const Key*>(recent->key), key)) {
      auto [it, inserted] = shard.entries.try_emplace(key);
      if (inserted) {
        it->second.key = &it->first;
        it->second.hash = static_cast<std::size_t>(h);
        it->second.shard = static_cast<std::uint32_t>(index);
        it->second.recent_slot = recent_slot;
      }
      recent = &it->second;
      slot.store(recent, std::memory_order_relaxed);
    }
    detail::WatchList& list = *recent;
    detail::set_list(node, &list, /*extra=*/!first);
    list.nodes.push_back(node);
    bump(shard.watched, 1);
    if (first) bump(shard.delayed, 1);
  }

  // Starts loading the lines a watch of the key hashed `h` will write (its shard's lock, and the
  // list its slot in `recent` points to, if any), so that the misses of several keys overlap
  // instead of each waiting behind the previous key's lock. A hint only: the slot is read
  // without the lock, and may point to a list already freed (a prefetch never faults).
  void prefetch(std::uint64_t h) const noexcept {
    const Shard& shard = shards_[shard_of_hash(h)];
    detail::prefetch_for_write(&shard.mu);
    detail::prefetch_for_write(
        shard.recent[h & (kRecentSlots - 1)].load(std::memory_order_relaxed));
  }

  // `outcome`: given for an operation's first node (which carries its count in `delayed`), of an
  // operation unwatched with that outcome (pending: cancelled); none for the other nodes and for
  // a refused watch (which counts nowhere).
  void unlink(detail::WatchNode& node, std::optional<Outcome> outcome) noexcept {
    detail::WatchList* list = detail::list_of(node);
    const bool first = !detail::is_extra(node);
    Shard& shard = shards_[list->shard];
    const std::lock_guard<detail::AdaptiveMutex> lock(shard.mu);
    list->nodes.erase(list->nodes.iterator_to(node));
    detail::set_list(node, nullptr, false);
    bump(shard.watched, -1);
    if (first) bump(shard.delayed, -1);
    if (outcome) bump(shard.outcomes[static_cast<std::size_t>(*outcome)], 1);
    if (list->nodes.empty()) {
      std::atomic<detail::WatchList*>& slot = shard.recent[list->recent_slot];
      if (slot.load(std::memory_order_relaxed) == list) {
        slot.store(nullptr, std::memory_order_relaxed);
      }
      // Erase through an iterator: erasing by a reference to the entry's own key is not safe. Found
      // by the key's address and linked hash: no Hash or KeyEqual runs here.
      shard.entries.erase(
          shard.entries.find(OwnKey{static_cast<const Key*>(list->key), list->hash}));
      // Bucket arrays never shrink by themselves: after a burst of keys, give the memory back
      // (amortized O(1): it takes a 16x fall in size between two shrinks).
      const std::size_t buckets = shard.entries.bucket_count();
      if (buckets > kMinShrinkBuckets && shard.entries.size() * 8 < buckets) {
        try {
          shard.entries.rehash(shard.entries.size() * 2);
        } catch (const std::bad_alloc&) {
          // Out of memory for the smaller array: keep the larger one (unlink cannot fail).
        }
      }
    }
  }

  Ops copy_watchers(const Key& key) {
    Ops ops;
    Shard& shard = shards_[shard_of(key)];
    const std::lock_guard<detail::AdaptiveMutex> lock(shard.mu);
    const auto it = shard.entries.find(key);
    if (it == shard.entries.end()) return ops;
    ops.reserve(it->second.nodes.size());
    for (detail::WatchNode& node : it->second.nodes)
      ops.emplace_back(&Access::op_of(node));
    return ops;
  }

  // PurgatoryOptions::timeout_slack of `timeout`.
  [[nodiscard]] Nanos slack_of(Nanos timeout) const noexcept {
    return Nanos{static_cast<Nanos::rep>(static_cast<double>(timeout.count()) * timeout_slack_)};
  }

  std::shared_ptr<SystemTimer> timer_;
  bool owns_timer_;
  double timeout_slack_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::unique_ptr<Shard[]> shards_;
  std::unique_ptr<std::uint64_t[]> shutdown_decided_;  // shutdown(): decided per shard
  boost::intrusive_ptr<State> state_;
};

}  // namespace purgatory::detail
