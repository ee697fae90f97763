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

  // Requires op's lock. Allocates the nodes; the registry links them.
  static std::span<WatchNode> begin_watch(DelayedOperation& op,
                                          boost::intrusive_ptr<WatchRegistry> registry,
                                          std::uint32_t keys) {
    op.nodes_ = std::make_unique<WatchNode[]>(keys);
    op.num_nodes_ = keys;
    op.registry_ = std::move(registry);
    return {op.nodes_.get(), keys};
  }
  // Requires op's lock and every node linked: from now on completing it unwatches it.
  static void commit_watch(DelayedOperation& op, Nanos now) noexcept {
    intrusive_ptr_add_ref(&op);  // the purgatory's watch reference, dropped when unwatched
    // Atomic: snapshot() reads it under a shard lock only, without the operation's lock.
    std::atomic_ref<Nanos>(op.watched_since_).store(now, std::memory_order_relaxed);
  }
  // Requires op's lock and no node linked: undoes begin_watch().
  static void abort_watch(DelayedOperation& op) noexcept {
    free_nodes(op);
    op.registry_.reset();
  }

  static std::span<WatchNode> nodes(DelayedOperation& op) noexcept {
    return {op.nodes_.get(), op.num_nodes_};
  }
  static void free_nodes(DelayedOperation& op) noexcept {
    op.nodes_.reset();
    op.num_nodes_ = 0;
  }
  static Nanos watched_since(const DelayedOperation& op) noexcept { return op.watched_since_; }
  // For snapshot(): readable without op's lock; Nanos{0} until commit_watch().
  static Nanos watched_since_relaxed(DelayedOperation& op) noexcept {
    return std::atomic_ref<Nanos>(op.watched_since_).load(std::memory_order_relaxed);
  }
  static const WatchRegistry* registry(const DelayedOperation& op) noexcept {
    return op.registry_.get();
  }

  // Requires op's lock held once by this thread: runs try_complete() under it.
  static bool try_complete_locked(DelayedOperation& op) noexcept {
    return op.run_try_complete_locked();
  }

  // Decides `outcome`, blocking on the lock (shutdown, rejected timeouts).
  static bool complete_with(DelayedOperation& op, Outcome outcome) {
    return op.complete_with(outcome);
  }

  // Requires op's lock; op pending, watched, its timeout cancelled. Stops watching it without
  // deciding an outcome (cancel_for_key). The caller holds a reference.
  static void detach(DelayedOperation& op) noexcept {
    op.registry_->unwatch(op, Outcome::pending);
    op.registry_.reset();
    intrusive_ptr_release(&op);
  }
};

}  // namespace purgatory::detail
