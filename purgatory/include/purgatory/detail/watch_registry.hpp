// Internal: the intrusive watch lists that let a completed operation leave every key at once.
//
// Each watched operation owns one WatchNode per key, allocated in one array when it is watched.
// A node is linked into the WatchList of its key (a purgatory-owned entry of a sharded key map),
// so completing an operation unlinks its nodes in O(keys) under the shard locks and frees them:
// nothing stays referenced from the other keys until a purge (KAFKA-19389, KAFKA-19763).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>

#include <boost/intrusive/list.hpp>
#include <boost/smart_ptr/intrusive_ref_counter.hpp>

#include "purgatory/outcome.hpp"

namespace purgatory {

class DelayedOperation;

namespace detail {

struct WatchList;

// One (operation, key) pair. Owned by the operation; linked into the key's list.
struct WatchNode {
  using Hook = boost::intrusive::list_member_hook<
      boost::intrusive::link_mode<boost::intrusive::normal_link>>;
  Hook hook;                       // guarded by the lock of the shard holding `list`
  DelayedOperation* op = nullptr;  // kept alive by the purgatory's watch reference
  WatchList* list = nullptr;       // null until linked
};

// The operations watched on one key. Guarded by its shard's lock.
struct WatchList {
  boost::intrusive::list<
      WatchNode, boost::intrusive::member_hook<WatchNode, WatchNode::Hook, &WatchNode::hook>,
      boost::intrusive::constant_time_size<true>>
      nodes;
  const void* key = nullptr;  // the key in the shard's map (node-stable), to erase the entry
  std::size_t hash = 0;       // Hash of that key: the entry is erased without hashing it again
  std::uint32_t shard = 0;
  std::uint32_t recent_slot = 0;  // the key's slot in its shard's lookup (the purgatory's `recent`)
};

// What a DelayedOperation needs from the purgatory watching it. Reference counted so that an
// operation racing a purgatory's destruction never touches freed state.
class WatchRegistry : public boost::intrusive_ref_counter<WatchRegistry> {
 public:
  WatchRegistry() = default;
  WatchRegistry(const WatchRegistry&) = delete;
  WatchRegistry& operator=(const WatchRegistry&) = delete;
  virtual ~WatchRegistry() = default;

  // Unlinks and frees every node of `op`, and accounts for `outcome` (pending: cancelled). For a
  // decided outcome, `op` then counts as finishing until finished(op). Called with op's lock
  // held; takes shard locks (lock order: operation, then shard).
  virtual void unwatch(DelayedOperation& op, Outcome outcome) noexcept = 0;

  // The callbacks of an operation unwatch() counted are about to run, then have run, on the
  // calling thread. shutdown() waits for every counted operation's finished().
  virtual void finish_started(const DelayedOperation& op) noexcept = 0;
  virtual void finished(const DelayedOperation& op) noexcept = 0;

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
