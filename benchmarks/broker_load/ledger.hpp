// The exactly-once check: per partition, what the producers were told (the acked batches) and
// what the consumers read (the log, by offset). Every consumer of a partition must read the same
// record at each offset; at the end the acked batches must tile each partition's log exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "failures.hpp"

namespace broker_load {

// One record's identity: which producer sent it, its sequence number there.
struct RecordId {
  std::int32_t producer = -1;
  std::int64_t seq = -1;
  bool operator==(const RecordId&) const = default;
};

class Ledger {
 public:
  explicit Ledger(int partitions);

  // A produce acked: `count` records of `producer` from `first_seq` on, at `base_offset`.
  void acked(int partition, std::int64_t base_offset, std::int32_t producer, std::int64_t first_seq,
             std::int64_t count);
  // The end of the partition's log as the acks say (final once every producer got its answers).
  [[nodiscard]] std::int64_t acked_end(int partition) const;

  // A consumer read `id` at `offset`, the next after the ones it read. False: another consumer
  // read another record there.
  bool consumed(int partition, std::int64_t offset, const RecordId& id);
  // How far the partition's log has been read.
  [[nodiscard]] std::size_t read_end(int partition) const;

  // Adds a failure for every acked offset not read, read as another record, or acked twice, and
  // every record read that was never acked. Returns the records acked.
  std::uint64_t verify(Failures& failures) const;

 private:
  struct Acked {
    std::int64_t base_offset;
    std::int32_t producer;
    std::int64_t first_seq;
    std::int64_t count;
  };
  std::vector<std::vector<RecordId>> log_;  // per partition: what consumers read, by offset
  std::vector<std::vector<Acked>> acked_;   // per partition: what producers were told
};

}  // namespace broker_load
