#include "protocol/record_batch.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "batch_walk.hpp"
#include "protocol/crc32c.hpp"

namespace purgatory::broker {

namespace {

std::uint64_t load_be(ByteView b, std::size_t at, int width) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v = (v << 8) | b[at + static_cast<std::size_t>(i)];
  return v;
}

constexpr std::int16_t kTransactionalFlag = 0x10;
constexpr std::int16_t kControlFlag = 0x20;

[[noreturn]] void corrupt(std::size_t at, std::string_view detail) {
  throw DecodeError(DecodeErrorKind::corrupt_records,
                    fmt::format("batch at byte {}: {}", at, detail));
}

}  // namespace

namespace detail {

std::size_t batch_size_at(ByteView records, std::size_t at, bool allow_partial_tail) {
  namespace L = batch_layout;
  const std::size_t remaining = records.size() - at;
  if (remaining < L::kHeaderBytes) {
    if (allow_partial_tail) return 0;
    corrupt(at,
            fmt::format("{} bytes remain, a batch header needs {}", remaining, L::kHeaderBytes));
  }
  const auto length = static_cast<std::int32_t>(load_be(records, at + L::kBatchLength, 4));
  if (length < static_cast<std::int32_t>(L::kHeaderBytes - L::kLogOverheadBytes)) {
    corrupt(at, fmt::format("batch length {} is below the minimum of {}", length,
                            L::kHeaderBytes - L::kLogOverheadBytes));
  }
  const std::size_t size = L::kLogOverheadBytes + static_cast<std::size_t>(length);
  if (size > remaining) {
    if (allow_partial_tail) return 0;
    corrupt(at, fmt::format("batch length {} runs past the end of the records (only {} bytes "
                            "follow the length field)",
                            length, remaining - L::kLogOverheadBytes));
  }
  return size;
}

BatchHeader check_batch(ByteView records, std::size_t at, std::size_t size) {
  namespace L = batch_layout;
  const ByteView batch = records.subspan(at, size);
  const auto magic = static_cast<std::int8_t>(batch[L::kMagic]);
  if (magic != L::kMagicV2) corrupt(at, fmt::format("magic {}, expected 2", magic));
  const auto stored = static_cast<std::uint32_t>(load_be(batch, L::kCrc, 4));
  const std::uint32_t computed = crc32c(batch.subspan(L::kAttributes));
  if (stored != computed) {
    corrupt(at, fmt::format("crc mismatch, stored {:#010x}, computed {:#010x}", stored, computed));
  }
  BatchHeader h;
  h.base_offset = static_cast<std::int64_t>(load_be(batch, L::kBaseOffset, 8));
  h.attributes = static_cast<std::int16_t>(load_be(batch, L::kAttributes, 2));
  h.last_offset_delta = static_cast<std::int32_t>(load_be(batch, L::kLastOffsetDelta, 4));
  h.base_timestamp = static_cast<std::int64_t>(load_be(batch, L::kBaseTimestamp, 8));
  h.max_timestamp = static_cast<std::int64_t>(load_be(batch, L::kMaxTimestamp, 8));
  h.producer_id = static_cast<std::int64_t>(load_be(batch, L::kProducerId, 8));
  h.producer_epoch = static_cast<std::int16_t>(load_be(batch, L::kProducerEpoch, 2));
  h.base_sequence = static_cast<std::int32_t>(load_be(batch, L::kBaseSequence, 4));
  h.records_count = static_cast<std::int32_t>(load_be(batch, L::kRecordsCount, 4));
  h.records = batch.subspan(L::kHeaderBytes);
  return h;
}

}  // namespace detail

RecordSetInfo validate_record_batches(ByteView records) {
  RecordSetInfo info;
  std::size_t at = 0;
  while (at < records.size()) {
    const std::size_t size = detail::batch_size_at(records, at, /*allow_partial_tail=*/false);
    const detail::BatchHeader h = detail::check_batch(records, at, size);
    if (h.last_offset_delta < 0) {
      corrupt(at, fmt::format("lastOffsetDelta {} is negative", h.last_offset_delta));
    }
    // Producers number records 0..n-1, so the count and the offset range agree; a mismatch means
    // offsets would be handed out for records that do not exist (or the reverse).
    if (std::int64_t{h.records_count} != std::int64_t{h.last_offset_delta} + 1) {
      corrupt(at, fmt::format("records count {} does not match lastOffsetDelta {} + 1",
                              h.records_count, h.last_offset_delta));
    }
    if (info.batch_count == 0) {
      info.producer.producer_id = h.producer_id;
      info.producer.producer_epoch = h.producer_epoch;
      info.producer.base_sequence = h.base_sequence;
      info.producer.last_offset_delta = h.last_offset_delta;
      info.transactional = (h.attributes & kTransactionalFlag) != 0;
      info.control = (h.attributes & kControlFlag) != 0;
    }
    ++info.batch_count;
    info.offset_count += std::int64_t{h.last_offset_delta} + 1;
    info.max_timestamp = std::max(info.max_timestamp, h.max_timestamp);
    at += size;
  }
  return info;
}

std::int64_t assign_base_offsets(std::span<std::uint8_t> records, std::int64_t first_offset) {
  namespace L = batch_layout;
  std::int64_t next = first_offset;
  std::size_t at = 0;
  while (at < records.size()) {
    const std::size_t size = detail::batch_size_at(records, at, /*allow_partial_tail=*/false);
    const auto base = static_cast<std::uint64_t>(next);
    for (std::size_t i = 0; i < 8; ++i) {
      records[at + L::kBaseOffset + i] = static_cast<std::uint8_t>(base >> (56 - 8 * i));
    }
    const auto delta = static_cast<std::int32_t>(load_be(records, at + L::kLastOffsetDelta, 4));
    if (delta < 0) corrupt(at, fmt::format("lastOffsetDelta {} is negative", delta));
    next += std::int64_t{delta} + 1;
    at += size;
  }
  return next;
}

}  // namespace purgatory::broker
