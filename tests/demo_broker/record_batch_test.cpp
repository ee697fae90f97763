#include "protocol/record_batch.hpp"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "protocol/crc32c.hpp"
#include "protocol/records.hpp"
#include "test_util.hpp"

namespace pb = purgatory::broker;
namespace L = pb::batch_layout;
using pb::test::bytes;
using pb::test::bytes_of;
using pb::test::concat;
using pb::test::decode_error_kind;
using Kind = pb::DecodeErrorKind;

namespace {

pb::Bytes sample_batch(std::size_t n = 3, std::int64_t base_offset = 0) {
  std::vector<pb::ProducerRecord> recs;
  for (std::size_t i = 0; i < n; ++i) {
    recs.push_back(
        {std::string("key-") + std::to_string(i), std::string("value-") + std::to_string(i)});
  }
  return pb::build_record_batch(recs, 1700000000000, base_offset);
}

void store_be32(pb::Bytes& b, std::size_t at, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i)
    b[at + i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

void recompute_crc(pb::Bytes& b) {
  store_be32(b, L::kCrc, pb::crc32c(pb::ByteView(b).subspan(L::kAttributes)));
}

}  // namespace

// A batch written by another implementation (a 12-byte value, null key, leader epoch 0, producer
// id 0) with its CRC as stored there: agreement proves the CRC region and algorithm match.
TEST_CASE("a batch from another Kafka implementation validates (independent CRC-32C check)") {
  const pb::Bytes batch = concat({
      bytes({0, 0, 0, 0, 0, 0, 0, 0}),                    // baseOffset 0
      bytes({0, 0, 0, 0x44}),                             // batchLength 68
      bytes({0, 0, 0, 0}),                                // partitionLeaderEpoch 0
      bytes({2}),                                         // magic 2
      bytes({0xAB, 0xFD, 0x04, 0x91}),                    // crc
      bytes({0, 0, 0, 0, 0, 0}),                          // attributes, lastOffsetDelta 0
      bytes({0, 0, 1, 0x91, 0xE0, 0x5B, 0x6D, 0x8B}),     // baseTimestamp
      bytes({0, 0, 1, 0x91, 0xE0, 0x5B, 0x6D, 0x8B}),     // maxTimestamp
      bytes({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),  // producerId, epoch, baseSequence
      bytes({0, 0, 0, 1}),                                // records count 1
      bytes({0x24, 0, 0, 0, 0x01, 0x18}),    // len 18, attrs, ts/offset delta, key null,
      bytes_of("Hello Kafka!"), bytes({0}),  // value (12), no headers
  });
  CHECK(batch.size() == 80);
  const pb::RecordSetInfo info = pb::validate_record_batches(batch);
  CHECK(info.batch_count == 1);
  CHECK(info.offset_count == 1);
  const std::vector<pb::ConsumerRecord> recs = pb::parse_record_batches(batch);
  REQUIRE(recs.size() == 1);
  CHECK(recs[0] == pb::ConsumerRecord{0, 0x191E05B6D8B, std::nullopt, std::string("Hello Kafka!")});
}

TEST_CASE("a built batch validates: 3 records take 3 offsets, header fields as documented") {
  const pb::Bytes batch = sample_batch(3);
  const pb::RecordSetInfo info = pb::validate_record_batches(batch);
  CHECK(info.batch_count == 1);
  CHECK(info.offset_count == 3);
  CHECK(info.max_timestamp == 1700000000000);
  pb::Reader r(batch);
  CHECK(r.read_int64("baseOffset") == 0);
  CHECK(r.read_int32("batchLength") == static_cast<std::int32_t>(batch.size() - 12));
  CHECK(r.read_int32("partitionLeaderEpoch") == -1);
  CHECK(r.read_int8("magic") == 2);
  CHECK(r.read_uint32("crc") == pb::crc32c(pb::ByteView(batch).subspan(21)));
  CHECK(r.read_int16("attributes") == 0);
  CHECK(r.read_int32("lastOffsetDelta") == 2);
  CHECK(r.read_int64("baseTimestamp") == 1700000000000);
  CHECK(r.read_int64("maxTimestamp") == 1700000000000);
  CHECK(r.read_int64("producerId") == -1);
  CHECK(r.read_int16("producerEpoch") == -1);
  CHECK(r.read_int32("baseSequence") == -1);
  CHECK(r.read_int32("recordsCount") == 3);
  CHECK(r.position() == L::kHeaderBytes);
}

TEST_CASE("an empty records blob holds zero batches and several batches are walked back to back") {
  CHECK(pb::validate_record_batches({}).batch_count == 0);
  const pb::Bytes two = concat({sample_batch(2), sample_batch(5)});
  const pb::RecordSetInfo info = pb::validate_record_batches(two);
  CHECK(info.batch_count == 2);
  CHECK(info.offset_count == 7);
}

TEST_CASE("flipping any byte in the CRC-covered region is corrupt_records") {
  const pb::Bytes good = sample_batch(2);
  for (std::size_t i = L::kAttributes; i < good.size(); ++i) {
    CAPTURE(i);
    pb::Bytes bad = good;
    bad[i] ^= 0x01;
    try {
      pb::validate_record_batches(bad);
      FAIL("expected DecodeError");
    } catch (const pb::DecodeError& e) {
      CHECK(e.kind() == Kind::corrupt_records);
      CHECK(e.kafka_error() == pb::Errc::corrupt_message);
      CHECK(std::string(e.what()).find("batch at byte 0: crc mismatch, stored 0x") == 0);
    }
  }
}

TEST_CASE("the error names the batch's position and both CRCs") {
  pb::Bytes two = concat({sample_batch(1), sample_batch(1)});
  const std::size_t second = two.size() / 2;
  store_be32(two, second + L::kCrc, 0xDEADBEEF);
  const std::uint32_t computed =
      pb::crc32c(pb::ByteView(two).subspan(second + L::kAttributes, second - L::kAttributes));
  char expected[128];
  std::snprintf(expected, sizeof expected,
                "batch at byte %zu: crc mismatch, stored 0xdeadbeef, computed 0x%08x", second,
                computed);
  CHECK(pb::test::decode_error_message([&] { pb::validate_record_batches(two); }) ==
        std::string(expected));
}

TEST_CASE("magic other than 2 is corrupt_records") {
  for (const std::uint8_t magic : {0, 1, 3}) {
    pb::Bytes bad = sample_batch(1);
    bad[L::kMagic] = magic;
    CHECK(decode_error_kind([&] { pb::validate_record_batches(bad); }) == Kind::corrupt_records);
    CHECK(pb::test::decode_error_message([&] {
            pb::validate_record_batches(bad);
          }).find("magic " + std::to_string(magic) + ", expected 2") != std::string::npos);
  }
}

TEST_CASE("truncated batches and bad lengths are corrupt_records") {
  const pb::Bytes good = sample_batch(2);
  // Every cut inside the batch, including inside the header.
  for (std::size_t n = 1; n < good.size(); ++n) {
    CAPTURE(n);
    const pb::Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK(decode_error_kind([&] { pb::validate_record_batches(cut); }) == Kind::corrupt_records);
  }
  // A second batch that is cut short.
  const pb::Bytes partial_tail = concat({good, pb::Bytes(good.begin(), good.begin() + 70)});
  CHECK(pb::test::decode_error_message([&] {
          pb::validate_record_batches(partial_tail);
        }).find("batch at byte " + std::to_string(good.size())) == 0);
  // batchLength below the header's 49 bytes, negative, and past the end.
  for (const std::uint32_t len : {0U, 48U, 0xFFFFFFFFU, 0x7FFFFFFFU}) {
    pb::Bytes bad = good;
    store_be32(bad, L::kBatchLength, len);
    CHECK(decode_error_kind([&] { pb::validate_record_batches(bad); }) == Kind::corrupt_records);
  }
}

TEST_CASE("records count must equal lastOffsetDelta + 1, and the delta must not be negative") {
  pb::Bytes bad = sample_batch(3);
  store_be32(bad, L::kRecordsCount, 2);
  recompute_crc(bad);
  CHECK(pb::test::decode_error_message([&] { pb::validate_record_batches(bad); }) ==
        "batch at byte 0: records count 2 does not match lastOffsetDelta 2 + 1");
  pb::Bytes negative = sample_batch(1);
  store_be32(negative, L::kLastOffsetDelta, 0xFFFFFFFFU);
  recompute_crc(negative);
  CHECK(decode_error_kind([&] { pb::validate_record_batches(negative); }) == Kind::corrupt_records);
}

TEST_CASE("assign_base_offsets rewrites only bytes 0..7 of each batch and keeps it valid") {
  const pb::Bytes first = sample_batch(3);
  const pb::Bytes second = sample_batch(2);
  const pb::Bytes original = concat({first, second});
  pb::Bytes blob = original;
  CHECK(pb::assign_base_offsets(blob, 1000) == 1005);

  pb::validate_record_batches(blob);
  for (std::size_t i = 0; i < blob.size(); ++i) {
    const bool in_base_offset = i < 8 || (i >= first.size() && i < first.size() + 8);
    if (!in_base_offset) {
      CAPTURE(i);
      CHECK(blob[i] == original[i]);
    }
  }
  pb::Reader r1(blob);
  CHECK(r1.read_int64("baseOffset") == 1000);
  pb::Reader r2(pb::ByteView(blob).subspan(first.size()));
  CHECK(r2.read_int64("baseOffset") == 1003);

  const std::vector<pb::ConsumerRecord> recs = pb::parse_record_batches(blob);
  REQUIRE(recs.size() == 5);
  for (std::size_t i = 0; i < recs.size(); ++i)
    CHECK(recs[i].offset == 1000 + std::int64_t(i));
}

TEST_CASE("assign_base_offsets on a blob it cannot walk throws instead of writing past the end") {
  pb::Bytes bad = sample_batch(1);
  store_be32(bad, L::kBatchLength, 0x7FFFFFFFU);
  CHECK(decode_error_kind([&] { pb::assign_base_offsets(bad, 0); }) == Kind::corrupt_records);
}
