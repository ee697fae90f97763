// Private to the codec: the per-batch checks shared by the broker's validator (record_batch.cpp)
// and the client's parser (records.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/record_batch.hpp"

namespace purgatory::broker::detail {

struct BatchHeader {
  std::int64_t base_offset = 0;
  std::int16_t attributes = 0;
  std::int32_t last_offset_delta = 0;
  std::int64_t base_timestamp = 0;
  std::int64_t max_timestamp = 0;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  std::int32_t base_sequence = -1;
  std::int32_t records_count = 0;
  ByteView records;  // the bytes after the 61-byte header
};

// Size of the batch starting at `at` (header included), after checking that its header fits and
// its batchLength is sane and within `records`. With allow_partial_tail, a batch cut off by the
// end of `records` returns 0 instead of throwing: fetch responses may end in a partial batch.
std::size_t batch_size_at(ByteView records, std::size_t at, bool allow_partial_tail);

// Checks magic and CRC of the batch [at, at + size) and returns its header fields.
BatchHeader check_batch(ByteView records, std::size_t at, std::size_t size);

}  // namespace purgatory::broker::detail
