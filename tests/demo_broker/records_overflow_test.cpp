// Regression for a bug fuzz_record_batch found: parse_record_batches() added a record's
// offsetDelta to the batch's baseOffset (and its timestampDelta to baseTimestamp) in int64
// without checking, which is undefined behaviour for a batch near the int64 limits. A fetch
// response is untrusted input, so such a batch must be rejected as corrupt_records instead.
// Inputs: tests/fuzz/regressions/fuzz_record_batch/{offset,timestamp}_overflow (same batches).
// Belongs in demo_broker_codec_tests once records.cpp checks the additions.
#include "protocol/records.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include <doctest/doctest.h>

#include "protocol/crc32c.hpp"
#include "protocol/errors.hpp"
#include "protocol/record_batch.hpp"

namespace {

namespace broker = purgatory::broker;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// The kind parse_record_batches() throws, or nullopt when it accepts the batch.
std::optional<broker::DecodeErrorKind> parse_error_kind(const broker::Bytes& batch) {
  try {
    (void)broker::parse_record_batches(batch);
  } catch (const broker::DecodeError& e) {
    return e.kind();
  }
  return std::nullopt;
}

void fix_crc(broker::Bytes& batch) {
  namespace L = broker::batch_layout;
  const std::uint32_t crc = broker::crc32c(broker::ByteView(batch).subspan(L::kAttributes));
  for (int i = 0; i < 4; ++i)
    batch[L::kCrc + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(crc >> (24 - 8 * i));
}

}  // namespace

TEST_CASE("parse_record_batches: baseOffset INT64_MAX with offsetDelta 1 is corrupt_records") {
  const std::vector<broker::ProducerRecord> two(2);
  const broker::Bytes batch = broker::build_record_batch(two, 0, kMax);
  REQUIRE(broker::validate_record_batches(batch).offset_count == 2);
  CHECK(parse_error_kind(batch) == broker::DecodeErrorKind::corrupt_records);
}

TEST_CASE(
    "parse_record_batches: baseTimestamp INT64_MAX with timestampDelta 1 is corrupt_records") {
  const std::vector<broker::ProducerRecord> one(1);
  broker::Bytes batch = broker::build_record_batch(one, kMax, 0);
  // The first record: length varint (1 byte), attributes, then timestampDelta 0 -> zigzag(1) = 2.
  REQUIRE(batch[broker::batch_layout::kHeaderBytes + 2] == 0);
  batch[broker::batch_layout::kHeaderBytes + 2] = 2;
  fix_crc(batch);
  CHECK(parse_error_kind(batch) == broker::DecodeErrorKind::corrupt_records);
}

TEST_CASE("parse_record_batches: offsets and timestamps right at the int64 limit still parse") {
  const std::vector<broker::ProducerRecord> two(2);
  const std::vector<broker::ConsumerRecord> got =
      broker::parse_record_batches(broker::build_record_batch(two, kMax, kMax - 1));
  REQUIRE(got.size() == 2);
  CHECK(got[1].offset == kMax);
  CHECK(got[1].timestamp == kMax);
}
