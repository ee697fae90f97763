// Internal: the purgatory's view of an operation's watch state. Not for users.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "purgatory/delayed_operation.hpp"

namespace purgatory::detail {

struct OperationAccess {
  // Marks `op` as watched; false if some call already did.
  static bool claim(DelayedOperation& op) noexcept {
    bool expected = false;
    return op.claimed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel);
  }
  static void unclaim(DelayedOperation& op) noexcept {
    op.claimed_.store(false, std::memory_order_release);
  }

  // Requires op's lock. Provides the nodes (inline up to kInlineKeys); the registry links them.
  static std::span<WatchNode> begin_watch(DelayedOperation& op, WatchRegistry* registry,
                                          std::uint32_t keys) {
    if (keys <= DelayedOperation::kInlineKeys) {
      op.nodes_ = op.inline_nodes_;
    } else {
      op.heap_nodes_ = std::make_unique<WatchNode[]>(keys);
      op.nodes_ = op.heap_nodes_.get();
    }
    for (std::uint32_t i = 0; i < keys; ++i) {
      op.nodes_[i].op = nullptr;
      op.nodes_[i].list = nullptr;
    }
    op.num_nodes_ = keys;
    op.registry_ = registry;
    return {op.nodes_, keys};
  }
  // Requires op's lock and every node linked: from now on completing it unwatches it.
  static void commit_watch(DelayedOperation& op, Nanos now) noexcept {
    intrusive_ptr_add_ref(&op);  // the purgatory's watch reference, dropped when unwatched
    // Atomic: snapshot() reads it under a shard lock only, without the operation's lock. Release:
    // a snapshot that reads it reads the clock afterwards, and gets no earlier time.
    std::atomic_ref<Nanos>(op.watched_since_).store(now, std::memory_order_release);
  }
  // Requires op's lock, op pending, committed, and its nodes unlinked by the caller: undoes
  // begin_watch() and commit_watch() (the watch was refused after all). The caller holds a
  // reference.
  static void abort_committed_watch(DelayedOperation& op) noexcept {
    abort_watch(op);
    std::atomic_ref<Nanos>(op.watched_since_)
        .store(DelayedOperation::kNotWatched, std::memory_order_relaxed);
    intrusive_ptr_release(&op);
  }
  // Requires op's lock and no node linked: undoes begin_watch().
  static void abort_watch(DelayedOperation& op) noexcept {
    free_nodes(op);
    op.registry_ = nullptr;
    drop_watch_notes(op);
  }

  static std::span<WatchNode> nodes(DelayedOperation& op) noexcept {
    return {op.nodes_, op.num_nodes_};
  }
  static void free_nodes(DelayedOperation& op) noexcept {
    op.heap_nodes_.reset();
    op.nodes_ = nullptr;
    op.num_nodes_ = 0;
  }
  static Nanos watched_since(const DelayedOperation& op) noexcept { return op.watched_since_; }
  // For snapshot(): readable without op's lock; negative until commit_watch().
  static Nanos watched_since_published(DelayedOperation& op) noexcept {
    return std::atomic_ref<Nanos>(op.watched_since_).load(std::memory_order_acquire);
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
    op.registry_slot_ = slot;
  }
  static std::uint32_t registry_slot(const DelayedOperation& op) noexcept {
    return op.registry_slot_;
  }

  // Whether op's expiry has begun (the timer called its run(), which decides a watched op as
  // soon as it has the lock): cancel_for_key(), a stop request and shutdown() leave it alone.
  static bool expiring(const DelayedOperation& op) noexcept { return op.expiring_.load(); }

  // Requires op's lock; op pending, watched, its timeout cancelled. Stops watching it without
  // deciding an outcome (cancel_for_key). The caller holds a reference.
  static void detach(DelayedOperation& op) noexcept {
    op.registry_->unwatch(op, Outcome::pending);
    op.registry_ = nullptr;
    intrusive_ptr_release(&op);
  }
};

}  // namespace purgatory::detail
