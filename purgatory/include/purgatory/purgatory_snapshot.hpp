/// @file
/// PurgatorySnapshot: the operations waiting in a DelayedOperationPurgatory right now, per key,
/// bounded, for live views and diagnostics (DelayedOperationPurgatory::snapshot()).
///
/// Taken shard by shard: each key's entry is exact at the moment its shard was read (its count,
/// and the operations at the head of its list, which is in the order they joined the key), and two
/// keys of different shards may be seen a few microseconds apart. The operations listed are
/// sorted oldest first by watched_since: a watch reads the clock once, just after joining all its
/// keys, so two watches of one key under way together may join in one order and read the clock in
/// the other. An operation watched on several keys appears under each of them (key_count says on
/// how many keys it waits). No listed operation started waiting after the snapshot's `now`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "purgatory/timer/clock.hpp"

namespace purgatory {

/// How much a snapshot may hold: at most max_keys keys, and per key the max_operations_per_key
/// operations at the head of its list (its oldest, but for watches that were under way together).
/// The totals are exact whatever the limits.
struct SnapshotLimits {
  std::size_t max_keys = 64;                ///< keys listed at most
  std::size_t max_operations_per_key = 16;  ///< operations listed per key at most (the oldest)
};

/// The operations waiting in a purgatory, per key (DelayedOperationPurgatory::snapshot()). A plain
/// value, thread-compatible: serialize it with no lock of the purgatory held.
template <class Key>
struct PurgatorySnapshot {
  /// One waiting operation.
  struct Operation {
    Nanos watched_since{0};       ///< clock().now() when the purgatory started watching it
    Nanos deadline{0};            ///< watched_since + timeout: when it expires unless completed
    Nanos timeout{0};             ///< DelayedOperation::timeout()
    std::uint32_t key_count = 0;  ///< keys it is watched on (it is listed under each)
  };
  /// One watched key and its oldest operations.
  struct KeyEntry {
    Key key;                            ///< a copy of the key
    std::size_t waiting = 0;            ///< operations watched on this key (exact)
    std::vector<Operation> operations;  ///< the list's head, by watched_since (oldest first)
  };

  Nanos now{0};                ///< the purgatory's clock, read just after the last shard
  std::size_t keys_total = 0;  ///< keys with at least one operation (exact per shard)
  std::size_t delayed = 0;     ///< operations waiting (num_delayed(), read with the shards)
  std::vector<KeyEntry> keys;  ///< at most max_keys, in no particular order
};

}  // namespace purgatory
