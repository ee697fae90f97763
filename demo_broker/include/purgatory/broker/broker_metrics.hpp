// BrokerMetrics: what the demo broker reports about itself (Broker::metrics()), kept apart from
// broker.hpp so that observability/ formats it without depending on the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "purgatory/broker/group_coordinator_stats.hpp"
#include "purgatory/purgatory_metrics.hpp"

namespace purgatory::broker {

// Idempotent producers (KIP-98): producer ids handed out, the state partitions keep, and what
// became of their batches besides being appended. A plain value, thread-compatible.
struct IdempotenceStats {
  std::uint64_t producer_ids_issued = 0;        // InitProducerId answered with a new id
  std::uint64_t transactional_refused = 0;      // InitProducerId or Produce of a transaction
  std::uint64_t producer_states = 0;            // (partition, producer) states remembered now
  std::uint64_t producer_states_forgotten = 0;  // dropped to make room (max per partition)
  // Retries recognised: answered with the original offset (or DUPLICATE_SEQUENCE_NUMBER for one
  // older than the 5 batches remembered), nothing appended.
  std::uint64_t duplicate_batches = 0;
  std::uint64_t out_of_order_batches = 0;      // OUT_OF_ORDER_SEQUENCE_NUMBER
  std::uint64_t stale_epoch_batches = 0;       // INVALID_PRODUCER_EPOCH
  std::uint64_t unknown_producer_batches = 0;  // UNKNOWN_PRODUCER_ID
};

// What the broker reports about itself: a snapshot, each field read atomically. A plain value,
// thread-compatible.
struct BrokerMetrics {
  PurgatoryMetrics fetch;
  PurgatoryMetrics produce;
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_open = 0;
  std::uint64_t requests = 0;
  std::uint64_t malformed_requests = 0;              // connections closed for a bad frame
  std::uint64_t abandoned_operations = 0;            // parked when their client disconnected
  std::vector<std::size_t> timer_pending_per_level;  // the shared timer, finest level first
  PurgatoryMetrics join;                             // the group coordinator's join purgatory
  PurgatoryMetrics heartbeat;                        // and its heartbeat purgatory
  GroupCoordinatorStats groups;
  IdempotenceStats idempotence;
};

}  // namespace purgatory::broker
