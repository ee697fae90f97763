// Internal: the intrusive watch lists that let a completed operation leave every key at once.
//
// A watched operation has one WatchNode per key. A node is linked into the WatchList of its key (a
// purgatory-owned entry of a sharded key map), so completing an operation unlinks its nodes in
// O(keys) under the shard locks: nothing stays referenced from the other keys until a purge.
//
// The first key's node is part of the operation (a base class of DelayedOperation: the operation
// is found from it by a cast, so the node stores no pointer to it). The nodes of further keys are
// ExtraWatchNodes, allocated in one block when the operation is watched and freed when it stops
// being watched; each carries its operation. A tag bit in the node's list pointer tells the two
// apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>

#include <boost/intrusive/list.hpp>
#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <boost/smart_ptr/intrusive_ref_counter.hpp>

#include "purgatory/export.hpp"
#include "purgatory/outcome.hpp"

namespace purgatory {

class DelayedOperation;

namespace detail {

struct WatchList;

// One (operation, key) pair, linked into the key's list. Member names are unusual on purpose:
// DelayedOperation derives from it (privately), so they are in scope in users' subclasses.
struct WatchNode {
  using Hook = boost::intrusive::list_member_hook<
      boost::intrusive::link_mode<boost::intrusive::normal_link>>;
  static constexpr std::uintptr_t kExtra = 1;  // in watch_list_: the node is an ExtraWatchNode

  Hook watch_hook_;  // guarded by the lock of the shard holding the list
  // The WatchList (null until linked), with kExtra for the nodes of keys after the first. Written
  // under the operation's lock and the list's shard lock; read under either.
  std::uintptr_t watch_list_ = 0;
};

inline WatchList* list_of(const WatchNode& node) noexcept {
  return reinterpret_cast<WatchList*>(node.watch_list_ & ~WatchNode::kExtra);
}
// Whether the node is an ExtraWatchNode (of a key after the first). Only while linked.
inline bool is_extra(const WatchNode& node) noexcept {
  return (node.watch_list_ & WatchNode::kExtra) != 0;
}
inline void set_list(WatchNode& node, WatchList* list, bool extra) noexcept {
  node.watch_list_ = reinterpret_cast<std::uintptr_t>(list) | (extra ? WatchNode::kExtra : 0);
}

// The node of a key after the first.
struct ExtraWatchNode : WatchNode {
  DelayedOperation* op = nullptr;  // kept alive by the purgatory's watch reference
};

// The nodes of an operation's keys after the first: one block, from the timer's pool.
class alignas(ExtraWatchNode) ExtraWatchNodes {
 public:
  // Throws std::bad_alloc.
  [[nodiscard]] PURGATORY_EXPORT static ExtraWatchNodes* create(DelayedOperation& op,
                                                                std::uint32_t count);
  // Every node must be unlinked.
  PURGATORY_EXPORT static void destroy(ExtraWatchNodes* nodes) noexcept;

  [[nodiscard]] std::uint32_t size() const noexcept { return count_; }
  ExtraWatchNode& operator[](std::uint32_t i) noexcept { return first()[i]; }

 private:
  explicit ExtraWatchNodes(std::uint32_t count) noexcept : count_(count) {}
  [[nodiscard]] static std::size_t bytes_for(std::uint32_t count) noexcept;
  PURGATORY_EXPORT ExtraWatchNode* first() noexcept;

  std::uint32_t count_;
};

// The operations watched on one key. Guarded by its shard's lock.
struct WatchList {
  boost::intrusive::list<
      WatchNode, boost::intrusive::member_hook<WatchNode, WatchNode::Hook, &WatchNode::watch_hook_>,
      boost::intrusive::constant_time_size<true>>
      nodes;
  const void* key = nullptr;  // the key in the shard's map (node-stable), to erase the entry
  std::size_t hash = 0;       // Hash of that key: the entry is erased without hashing it again
  std::uint32_t shard = 0;
  std::uint32_t recent_slot = 0;  // the key's slot in its shard's lookup (the purgatory's `recent`)
};

class WatchRegistry;

// The callbacks of one decided operation (or the report of an error its try_complete() threw),
// running on the calling thread: it lives on that thread's stack, on a per-thread stack of such
// records (innermost first). A shutdown() called from those callbacks neither waits for them nor
// lets the purgatory's state go before they end (it sets `keep`).
struct RunningFinish {
  WatchRegistry* registry = nullptr;
  std::uint32_t slot = 0;
  RunningFinish* outer = nullptr;
  boost::intrusive_ptr<WatchRegistry> keep;
};

// What a DelayedOperation needs from the purgatory watching it. Reference counted so that an
// operation racing a purgatory's destruction never touches freed state.
class PURGATORY_EXPORT WatchRegistry : public boost::intrusive_ref_counter<WatchRegistry> {
 public:
  WatchRegistry() = default;
  WatchRegistry(const WatchRegistry&) = delete;
  WatchRegistry& operator=(const WatchRegistry&) = delete;
  virtual ~WatchRegistry() = default;

  // Unlinks and frees every node of `op`, and accounts for `outcome` (pending: cancelled). For a
  // decided outcome, `op` then counts as finishing in the shard of its first key (its registry
  // slot) until finished(). Called with op's lock held; takes shard locks (lock order: operation,
  // then shard).
  virtual void unwatch(DelayedOperation& op, Outcome outcome) noexcept = 0;

  // The callbacks of an operation unwatch() counted in `slot` are about to run on the calling
  // thread (`running` lives until finished(running)).
  virtual void finish_started(RunningFinish& running, std::uint32_t slot) noexcept = 0;
  // They have run. The operation stops counting, and this is the last access to the registry's
  // memory (except through running.keep): a shutdown() waiting for it may return and free it.
  virtual void finished(RunningFinish& running) noexcept = 0;

  // Reports an exception thrown by one of op's callbacks. No lock held.
  virtual void report_error(const DelayedOperation& op, std::exception_ptr error,
                            std::string_view where) noexcept = 0;

  // An exception that op's try_complete() threw, with op's lock held and op watched, is reported
  // only once that lock is released (report_held_error()); until then it counts as finishing, so
  // that shutdown() waits for the report too. Called with op's lock held; returns the slot to
  // pass to report_held_error().
  virtual std::uint32_t hold_error(DelayedOperation& op) noexcept = 0;
  // Reports an error hold_error() counted in `slot`, then stops counting it. No lock held.
  virtual void report_held_error(const DelayedOperation& op, std::uint32_t slot,
                                 std::exception_ptr error, std::string_view where) noexcept = 0;
};

// The purgatory's access to an operation's watch state (kept private from users).
struct OperationAccess;

}  // namespace detail
}  // namespace purgatory
