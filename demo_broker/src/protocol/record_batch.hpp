// Record batches (message format v2, "magic 2") as opaque blobs: what the broker checks before it
// appends a produce request's records to a log, and how it gives them offsets.
//
// A batch is a 61-byte header followed by its records:
//   0 baseOffset int64 | 8 batchLength int32 (bytes after this field) | 12 partitionLeaderEpoch
//   int32 | 16 magic int8 | 17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 |
//   27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16
//   | 53 baseSequence int32 | 57 recordsCount int32 | 61 records...
// The CRC-32C covers bytes 21 to the end of the batch. It does not cover baseOffset (nor the
// leader epoch), which is what lets a broker stamp offsets into a batch without re-checksumming.
//
// The broker never looks inside the records: compressed batches pass through unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "protocol/wire.hpp"

namespace purgatory::broker {

namespace batch_layout {
inline constexpr std::size_t kBaseOffset = 0;
inline constexpr std::size_t kBatchLength = 8;
inline constexpr std::size_t kPartitionLeaderEpoch = 12;
inline constexpr std::size_t kMagic = 16;
inline constexpr std::size_t kCrc = 17;
inline constexpr std::size_t kAttributes = 21;
inline constexpr std::size_t kLastOffsetDelta = 23;
inline constexpr std::size_t kBaseTimestamp = 27;
inline constexpr std::size_t kMaxTimestamp = 35;
inline constexpr std::size_t kProducerId = 43;
inline constexpr std::size_t kProducerEpoch = 51;
inline constexpr std::size_t kBaseSequence = 53;
inline constexpr std::size_t kRecordsCount = 57;
inline constexpr std::size_t kHeaderBytes = 61;
// baseOffset + batchLength: the part of the header batchLength does not count.
inline constexpr std::size_t kLogOverheadBytes = 12;
inline constexpr std::int8_t kMagicV2 = 2;
}  // namespace batch_layout

// Thread-safety: every struct here is a plain value type, thread-compatible.
// Who wrote a batch, as its header says (KIP-98): an idempotent producer stamps its producer id
// and epoch, and numbers its batches per partition: baseSequence is the sequence of the first
// record, baseSequence + lastOffsetDelta that of the last. producer_id -1: not idempotent.
struct BatchProducer {
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  std::int32_t base_sequence = -1;
  std::int32_t last_offset_delta = 0;

  [[nodiscard]] bool idempotent() const noexcept { return producer_id >= 0; }
  // The last record's sequence; sequences wrap from INT32_MAX to 0, as in Kafka.
  [[nodiscard]] std::int32_t last_sequence() const noexcept {
    const std::int64_t last = std::int64_t{base_sequence} + last_offset_delta;
    return static_cast<std::int32_t>(last > 0x7FFFFFFF ? last - 0x80000000LL : last);
  }
  bool operator==(const BatchProducer&) const = default;
};

struct RecordSetInfo {
  std::size_t batch_count = 0;
  std::int64_t offset_count = 0;  // sum of lastOffsetDelta + 1: offsets the records will take
  std::int64_t max_timestamp = -1;
  // Of the first batch (a Produce v3+ request carries exactly one per partition).
  BatchProducer producer;
  bool transactional = false;  // attributes bit 4: part of a transaction
  bool control = false;        // attributes bit 5: a transaction marker, never sent by producers
};

// Checks every batch in `records` (batches back to back, as in a produce request): the header
// fits, batchLength is at least the header's and within the blob, magic == 2, the CRC-32C
// matches, lastOffsetDelta >= 0 and recordsCount == lastOffsetDelta + 1 (what every producer
// writes). An empty blob is valid and holds zero batches; Kafka itself requires exactly one batch
// per partition in Produce v3+, which the caller can enforce with batch_count.
// Throws DecodeError(corrupt_records) whose message names the batch's byte position and the
// problem, e.g. "batch at byte 61: crc mismatch, stored 0x1a2b3c4d, computed 0x5e6f7a8b".
// kafka_error() of that error is CORRUPT_MESSAGE.
RecordSetInfo validate_record_batches(ByteView records);

// Writes first_offset, first_offset + (lastOffsetDelta + 1 of batch 0), ... into each batch's
// baseOffset, touching no other byte, so every CRC stays valid. Returns the offset after the
// last record. Precondition: `records` passed validate_record_batches(); a blob that cannot be
// walked still throws DecodeError(corrupt_records) rather than write out of bounds.
std::int64_t assign_base_offsets(std::span<std::uint8_t> records, std::int64_t first_offset);

}  // namespace purgatory::broker
