#include "protocol/records.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "batch_walk.hpp"
#include "protocol/crc32c.hpp"
#include "protocol/record_batch.hpp"

namespace purgatory::broker {

namespace {

constexpr std::int16_t kCompressionMask = 0x07;
constexpr std::int16_t kLogAppendTimeFlag = 0x08;
constexpr std::int16_t kControlFlag = 0x20;

void write_varint_bytes(Writer& w, const std::optional<std::string>& s) {
  if (!s) {
    w.write_varint(-1);
    return;
  }
  if (s->size() > 0x7FFFFFFFU) throw std::length_error("record key or value exceeds 2 GiB");
  w.write_varint(static_cast<std::int32_t>(s->size()));
  w.write_raw(ByteView(reinterpret_cast<const std::uint8_t*>(s->data()), s->size()));
}

std::optional<std::string> read_varint_bytes(Reader& r, std::string_view field) {
  const std::int32_t len = r.read_varint(field);
  if (len == -1) return std::nullopt;
  if (len < 0) {
    r.fail(DecodeErrorKind::negative_length, field, fmt::format("length {} is negative", len));
  }
  const ByteView b = r.read_raw(static_cast<std::size_t>(len), field);
  return std::string(b.begin(), b.end());
}

// Reads one record from `r` (positioned at its length varint).
ConsumerRecord read_record(Reader& r, const detail::BatchHeader& h) {
  const std::int32_t length = r.read_varint("record.length");
  if (length < 0) {
    r.fail(DecodeErrorKind::negative_length, "record.length",
           fmt::format("length {} is negative", length));
  }
  Reader rec(r.read_raw(static_cast<std::size_t>(length), "record.length"));
  ConsumerRecord out;
  rec.read_int8("record.attributes");
  const std::int64_t timestamp_delta = rec.read_varlong("record.timestamp_delta");
  const std::int32_t offset_delta = rec.read_varint("record.offset_delta");
  // Both sums come from untrusted bytes: one that leaves int64 is a corrupt batch, not UB.
  if (__builtin_add_overflow(h.base_offset, std::int64_t{offset_delta}, &out.offset)) {
    rec.fail(DecodeErrorKind::corrupt_records, "record.offset_delta",
             fmt::format("base offset {} + delta {} overflows int64", h.base_offset, offset_delta));
  }
  if ((h.attributes & kLogAppendTimeFlag) != 0) {
    out.timestamp = h.max_timestamp;
  } else if (__builtin_add_overflow(h.base_timestamp, timestamp_delta, &out.timestamp)) {
    rec.fail(DecodeErrorKind::corrupt_records, "record.timestamp_delta",
             fmt::format("base timestamp {} + delta {} overflows int64", h.base_timestamp,
                         timestamp_delta));
  }
  out.key = read_varint_bytes(rec, "record.key");
  out.value = read_varint_bytes(rec, "record.value");
  const std::int32_t headers = rec.read_varint("record.headers");
  if (headers < 0) {
    rec.fail(DecodeErrorKind::negative_length, "record.headers",
             fmt::format("header count {} is negative", headers));
  }
  for (std::int32_t i = 0; i < headers; ++i) {
    const std::optional<std::string> key = read_varint_bytes(rec, "record.headers[].key");
    if (!key) rec.fail(DecodeErrorKind::negative_length, "record.headers[].key", "null key");
    read_varint_bytes(rec, "record.headers[].value");
  }
  rec.expect_end("record");
  return out;
}

}  // namespace

Bytes build_record_batch(std::span<const ProducerRecord> records, std::int64_t timestamp_ms,
                         std::int64_t base_offset, const BatchProducer& producer) {
  namespace L = batch_layout;
  if (records.empty()) throw std::invalid_argument("a record batch needs at least one record");
  if (records.size() > 0x7FFFFFFFU) throw std::length_error("too many records for one batch");
  const auto count = static_cast<std::int32_t>(records.size());

  Writer w;
  w.write_int64(base_offset);
  w.write_int32(0);   // batchLength, patched below
  w.write_int32(-1);  // partitionLeaderEpoch: the broker's to set
  w.write_int8(L::kMagicV2);
  w.write_uint32(0);  // crc, patched below
  w.write_int16(0);   // attributes: no compression, CreateTime, not transactional
  w.write_int32(count - 1);
  w.write_int64(timestamp_ms);          // baseTimestamp
  w.write_int64(timestamp_ms);          // maxTimestamp
  w.write_int64(producer.producer_id);  // -1: not idempotent
  w.write_int16(producer.producer_epoch);
  w.write_int32(producer.base_sequence);
  w.write_int32(count);
  for (std::int32_t i = 0; i < count; ++i) {
    const ProducerRecord& rec = records[static_cast<std::size_t>(i)];
    Writer body;
    body.write_int8(0);     // attributes (unused)
    body.write_varlong(0);  // timestampDelta
    body.write_varint(i);   // offsetDelta
    write_varint_bytes(body, rec.key);
    write_varint_bytes(body, rec.value);
    body.write_varint(0);  // no headers
    if (body.size() > 0x7FFFFFFFU) throw std::length_error("record exceeds 2 GiB");
    w.write_varint(static_cast<std::int32_t>(body.size()));
    w.write_raw(body.bytes());
  }
  if (w.size() - L::kLogOverheadBytes > 0x7FFFFFFFU) throw std::length_error("batch exceeds 2 GiB");
  w.patch_int32(L::kBatchLength, static_cast<std::int32_t>(w.size() - L::kLogOverheadBytes));
  const std::uint32_t crc = crc32c(ByteView(w.bytes()).subspan(L::kAttributes));
  w.patch_int32(L::kCrc, static_cast<std::int32_t>(crc));
  return std::move(w).take();
}

std::vector<ConsumerRecord> parse_record_batches(ByteView records) {
  std::vector<ConsumerRecord> out;
  std::size_t at = 0;
  while (at < records.size()) {
    const std::size_t size = detail::batch_size_at(records, at, /*allow_partial_tail=*/true);
    if (size == 0) break;  // the broker cut the last batch short
    const detail::BatchHeader h = detail::check_batch(records, at, size);
    if ((h.attributes & kCompressionMask) != 0) {
      throw DecodeError(DecodeErrorKind::unsupported_compression,
                        fmt::format("batch at byte {}: compression codec {} is not supported", at,
                                    h.attributes & kCompressionMask));
    }
    if ((h.attributes & kControlFlag) == 0) {
      try {
        Reader r(h.records);
        // Every record takes at least 7 bytes (seven one-byte varints and fields), which bounds
        // the count before anything is reserved for it.
        if (h.records_count < 0 || static_cast<std::size_t>(h.records_count) > r.remaining() / 7) {
          r.fail(DecodeErrorKind::bad_count, "batch.records_count",
                 fmt::format("count {} does not fit in {} bytes of records", h.records_count,
                             r.remaining()));
        }
        const auto n = static_cast<std::size_t>(h.records_count);
        out.reserve(out.size() + n);
        for (std::size_t i = 0; i < n; ++i)
          out.push_back(read_record(r, h));
        r.expect_end("batch.records");
      } catch (const DecodeError& e) {
        throw DecodeError(DecodeErrorKind::corrupt_records,
                          fmt::format("batch at byte {}: {}", at, e.what()));
      }
    }
    at += size;
  }
  return out;
}

}  // namespace purgatory::broker
