// IdempotenceStats: what ProduceHandler counts of idempotent producers (KIP-98), reported in
// BrokerMetrics, /metrics and the live view.
#pragma once

#include <cstdint>

namespace purgatory::broker {

// Producer ids handed out, the state partitions keep, and what became of their batches besides
// being appended. A plain value, thread-compatible.
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

}  // namespace purgatory::broker
