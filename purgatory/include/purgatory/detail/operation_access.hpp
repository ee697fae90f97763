// Internal: the purgatory's view of an operation's watch state. Not for users.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "purgatory/delayed_operation.hpp"

namespace purgatory::detail {

struct OperationAccess {
  // The operation's timeout task (a private base: users cannot reach it).
  static TimerTask& task(DelayedOperation& op) noexcept { return op; }
  // Withdraws the operation's timeout only (TimerTask::cancel()); true if it was pending.
  static bool cancel_timeout(DelayedOperation& op) noexcept { return op.TimerTask::cancel(); }
  // Whether the operation has its outcome listener (or one is being set).
  static bool has_listener(const DelayedOperation& op) noexcept {
    return (op.signals_.load() & DelayedOperation::kListenerSet) != 0;
  }
  // The outcome hook (one per operation): throws std::logic_error for a second one.
  static void listen(DelayedOperation& op, std::unique_ptr<OutcomeListener> listener) {
    op.listen(std::move(listener));
  }

  // Requires op's lock. Marks `op` as watched; false if some call already did.
  static bool claim_locked(DelayedOperation& op) noexcept {
    const std::uint8_t d = op.decision_.load(std::memory_order_relaxed);
    if ((d & DelayedOperation::kClaimed) != 0) return false;
    op.decision_.store(static_cast<std::uint8_t>(d | DelayedOperation::kClaimed),
                       std::memory_order_release);
    return true;
  }
  // Requires op's lock: undoes claim_locked() (the watch was refused).
  static void unclaim_locked(DelayedOperation& op) noexcept {
    op.decision_.store(static_cast<std::uint8_t>(op.decision_.load(std::memory_order_relaxed) &
                                                 ~DelayedOperation::kClaimed),
                       std::memory_order_release);
  }

  // Requires op's lock. Provides the nodes (the first inside the operation, the others in one
  // block), unlinked; the registry links them with node(). Throws std::bad_alloc.
  static void begin_watch(DelayedOperation& op, WatchRegistry* registry, std::uint32_t keys) {
    if (keys > DelayedOperation::kInlineKeys) {
      op.extra_nodes_ = ExtraWatchNodes::create(op, keys - DelayedOperation::kInlineKeys);
    }
    static_cast<WatchNode&>(op).watch_list_ = 0;
    op.held_ |= DelayedOperation::kWatched;
    op.registry_ = registry;
  }
  // Requires op's lock and every node linked: from now on completing it unwatches it.
  static void commit_watch(DelayedOperation& op, Nanos now) noexcept {
    intrusive_ptr_add_ref(&op);  // the purgatory's watch reference, dropped when unwatched
    // Atomic: snapshot() reads it under a shard lock only, without the operation's lock. Release:
    // a snapshot that reads it reads the clock afterwards, and gets no earlier time.
    op.watched_since_.store(now, std::memory_order_release);
  }
  // Requires op's lock, op pending, committed, and its nodes unlinked by the caller: undoes
  // begin_watch() and commit_watch() (the watch was refused after all). The caller holds a
  // reference.
  static void abort_committed_watch(DelayedOperation& op) noexcept {
    abort_watch(op);
    op.watched_since_.store(DelayedOperation::kNotWatched, std::memory_order_relaxed);
    intrusive_ptr_release(&op);
  }
  // Requires op's lock and no node linked: undoes begin_watch().
  static void abort_watch(DelayedOperation& op) noexcept {
    free_nodes(op);
    op.registry_ = nullptr;
    drop_watch_notes(op);
  }

  // Requires op's lock (or, while a node of op is linked, the lock of that node's shard) and op
  // watched: its number of keys, and the node of key i.
  static std::uint32_t key_count(DelayedOperation& op) noexcept {
    return DelayedOperation::kInlineKeys + (op.extra_nodes_ ? op.extra_nodes_->size() : 0);
  }
  static WatchNode& node(DelayedOperation& op, std::uint32_t i) noexcept {
    if (i < DelayedOperation::kInlineKeys) return static_cast<WatchNode&>(op);
    return (*op.extra_nodes_)[i - DelayedOperation::kInlineKeys];
  }
  // The operation a linked node belongs to.
  static DelayedOperation& op_of(WatchNode& node) noexcept {
    if (is_extra(node)) return *static_cast<ExtraWatchNode&>(node).op;
    return static_cast<DelayedOperation&>(node);
  }
  // Requires op's lock and no node linked: frees the nodes; op is no longer watched.
  static void free_nodes(DelayedOperation& op) noexcept {
    if (op.extra_nodes_ != nullptr) ExtraWatchNodes::destroy(op.extra_nodes_);
    op.extra_nodes_ = nullptr;
    op.held_ &= static_cast<std::uint8_t>(~DelayedOperation::kWatched);
  }
  // Requires op's lock. Whether a purgatory watches op now.
  static bool watched(const DelayedOperation& op) noexcept { return op.watched_locked(); }

  static Nanos watched_since(const DelayedOperation& op) noexcept {
    return op.watched_since_.load(std::memory_order_relaxed);
  }
  // For snapshot(): readable without op's lock; negative until commit_watch().
  static Nanos watched_since_published(const DelayedOperation& op) noexcept {
    return op.watched_since_.load(std::memory_order_acquire);
  }
  static const WatchRegistry* registry(const DelayedOperation& op) noexcept { return op.registry_; }

  // Requires op's lock held once by this thread: runs try_complete() under it.
  static bool try_complete_locked(DelayedOperation& op) noexcept {
    return op.run_try_complete_locked(DelayedOperation::kDirectCheck);
  }

  // A purgatory's check of a key watching `op`: as safe_try_complete(), but only while `op` is
  // still watched (a check that copied it before it was cancelled or refused does nothing).
  static bool check_watched(DelayedOperation& op) {
    return op.check(DelayedOperation::kWatchCheck);
  }

  // Decides `outcome`, blocking on the lock (rejected timeouts).
  static bool complete_with(DelayedOperation& op, Outcome outcome) {
    return op.complete_with(outcome);
  }
  // shutdown(): decides Outcome::shut_down if `op` is still watched, unless its expiry has begun.
  // Returns false when it left `op` to that expiry (still watched until the expiry has the lock).
  static bool shut_down_unless_expiring(DelayedOperation& op) {
    return op.shut_down_unless_expiring();
  }

  // Requires op's lock. Checks skipped while the lock was held by a watch now refused are void.
  static void drop_watch_notes(DelayedOperation& op) noexcept {
    op.notes_.fetch_and(static_cast<std::uint8_t>(~DelayedOperation::kWatchCheck));
  }

  static void set_registry_slot(DelayedOperation& op, std::uint32_t slot) noexcept {
    op.registry_slot_ = static_cast<std::uint16_t>(slot);
  }
  static std::uint32_t registry_slot(const DelayedOperation& op) noexcept {
    return op.registry_slot_;
  }
  static constexpr std::uint32_t kMaxRegistrySlots = 65536;  // registry_slot_ holds 16 bits

  // Whether op's expiry has begun (the timer called its run(), which decides a watched op as
  // soon as it has the lock): cancel_for_key(), a stop request and shutdown() leave it alone.
  static bool expiring(const DelayedOperation& op) noexcept {
    return (op.signals_.load() & DelayedOperation::kExpiring) != 0;
  }

  // Requires op's lock; op pending, watched, its timeout cancelled. Stops watching it without
  // deciding an outcome (cancel_for_key). The caller holds a reference.
  static void detach(DelayedOperation& op) noexcept {
    op.registry_->unwatch(op, Outcome::pending);
    op.registry_ = nullptr;
    intrusive_ptr_release(&op);
  }
};

}  // namespace purgatory::detail
