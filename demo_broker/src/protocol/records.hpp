// Records inside a batch, for the client side: build a batch to produce, read the records of a
// fetch response. The broker itself never needs this (it treats batches as opaque blobs, see
// record_batch.hpp).
//
// A record (uncompressed, magic 2) is: length varint, attributes int8, timestampDelta varlong,
// offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
// headers count varint, headers [keyLength varint, key, valueLength varint, value]. Varints are
// zigzag-encoded.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol/record_batch.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
// What a producer sends. Keys and values are arbitrary bytes held in std::string.
struct ProducerRecord {
  std::optional<std::string> key;
  std::optional<std::string> value;

  bool operator==(const ProducerRecord&) const = default;
};

// What a consumer reads back.
struct ConsumerRecord {
  std::int64_t offset = 0;
  std::int64_t timestamp = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;

  bool operator==(const ConsumerRecord&) const = default;
};

// One uncompressed batch holding `records` with offset deltas 0..n-1, all stamped
// `timestamp_ms` (CreateTime), leader epoch -1, baseOffset `base_offset`, and the producer id,
// epoch and base sequence of `producer` (its last_offset_delta is ignored: the records set it).
// The default producer is none (-1): a batch of a producer that is not idempotent. Throws
// std::invalid_argument if `records` is empty (a batch holds at least one record).
Bytes build_record_batch(std::span<const ProducerRecord> records, std::int64_t timestamp_ms,
                         std::int64_t base_offset = 0, const BatchProducer& producer = {});

// The records of every batch in `records` (a fetch response's blob), checking each batch's length,
// magic and CRC first. A batch cut short at the end of the blob is skipped, as Kafka consumers do:
// brokers may truncate the last batch at the fetch size limit. Control batches (transaction
// markers) are skipped. Throws DecodeError: corrupt_records for a bad batch or a malformed record,
// unsupported_compression for a compressed batch.
std::vector<ConsumerRecord> parse_record_batches(ByteView records);

}  // namespace purgatory::broker
