// ProducerStateTable: what one partition remembers of its idempotent producers, so that a
// producer's retry is recognised instead of appended twice (KIP-98; Kafka's ProducerStateManager
// and ProducerAppendInfo, without transactions).
//
// An idempotent producer stamps each batch with its producer id and epoch and numbers its records
// per partition: a batch holds sequences base_sequence .. base_sequence + lastOffsetDelta, and the
// next batch starts one past the last. Per producer the table keeps its epoch and its last 5
// batches (sequence range, offsets), Kafka's NUM_BATCHES_TO_RETAIN, matching the 5 requests a
// producer may have in flight (max.in.flight.requests.per.connection). A batch is then:
//   - a duplicate when it repeats the sequence range of one of those 5 (same epoch): it is not
//     appended, and answered with the original's offset and no error, as Kafka does, so the
//     producer's retry after a lost response succeeds with the offsets of the first attempt;
//   - DUPLICATE_SEQUENCE_NUMBER (46) when, in the same epoch, it lies wholly at or before the last
//     sequence but is older than the 5 remembered: already written, the original offset unknown;
//   - OUT_OF_ORDER_SEQUENCE_NUMBER (45) when it does not start one past the last sequence (a gap,
//     or an overlap), or starts a new epoch at a sequence other than 0;
//   - INVALID_PRODUCER_EPOCH (47) when its epoch is older than the producer's current one;
//   - UNKNOWN_PRODUCER_ID (59) when the partition has no state for the producer and the batch does
//     not start at sequence 0 (as Kafka 1.0-2.x: the producer's state is gone, so the client
//     starts over with a new producer id);
//   - appended otherwise, and remembered.
//
// Memory is bounded: at most `max_producers` producers per partition. When a new producer needs
// room, the one that appended least recently is forgotten (in the spirit of Kafka's
// producer.id.expiration.ms, by count instead of time: this log has no clock); its next batch
// then gets UNKNOWN_PRODUCER_ID unless it starts at sequence 0. So a partition holds at most
// max_producers x 5 batch entries, whatever the number of producers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/record_batch.hpp"

namespace purgatory::broker {

// One appended batch of a producer, as remembered. A plain value, thread-compatible.
struct ProducerBatchEntry {
  std::int32_t first_sequence = 0;
  std::int32_t last_sequence = 0;
  std::int64_t first_offset = 0;
  std::int64_t last_offset = 0;

  bool operator==(const ProducerBatchEntry&) const = default;
};

// What check() decided for a batch. A plain value, thread-compatible.
struct ProducerCheck {
  Errc error = Errc::none;                      // none: append it, unless `duplicate` is set
  std::optional<ProducerBatchEntry> duplicate;  // the remembered batch it repeats
  std::string why;  // for an error or a duplicate: what was expected and what came
};

// One producer as the live view lists it. A plain value, thread-compatible.
struct ProducerSnapshot {
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  std::int32_t last_sequence = -1;
  std::int64_t last_offset = -1;
  std::size_t batches = 0;  // remembered, at most 5
};

// Thread-compatible: the broker's io thread owns it, inside a PartitionLog.
class ProducerStateTable {
 public:
  // Batches remembered per producer (Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN).
  static constexpr std::size_t kBatchesPerProducer = 5;

  // Throws std::invalid_argument for max_producers == 0.
  explicit ProducerStateTable(std::size_t max_producers);

  // Checks a batch of an idempotent producer (batch.idempotent()) against its state; changes
  // nothing.
  [[nodiscard]] ProducerCheck check(const BatchProducer& batch) const;

  // Remembers a batch check() accepted, appended at first_offset..last_offset. Returns true when
  // this forgot another producer to make room.
  bool record(const BatchProducer& batch, std::int64_t first_offset, std::int64_t last_offset);

  [[nodiscard]] std::size_t size() const noexcept { return producers_.size(); }
  [[nodiscard]] std::size_t max_producers() const noexcept { return max_producers_; }
  // The producers that appended most recently first, at most `limit`.
  [[nodiscard]] std::vector<ProducerSnapshot> snapshot(std::size_t limit) const;

 private:
  struct Entry {
    std::int16_t epoch = -1;
    std::vector<ProducerBatchEntry> batches;  // oldest first, at most kBatchesPerProducer
    std::uint64_t last_used = 0;              // the table's append count when it last appended
  };

  std::size_t max_producers_;
  std::uint64_t appends_ = 0;
  std::unordered_map<std::int64_t, Entry> producers_;
};

}  // namespace purgatory::broker
