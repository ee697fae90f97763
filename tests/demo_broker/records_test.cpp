#include "protocol/records.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "protocol/crc32c.hpp"
#include "protocol/record_batch.hpp"
#include "test_util.hpp"

namespace pb = purgatory::broker;
namespace L = pb::batch_layout;
using pb::test::bytes;
using pb::test::decode_error_kind;
using Kind = pb::DecodeErrorKind;

namespace {

void patch_attributes_and_crc(pb::Bytes& b, std::uint16_t attributes) {
  b[L::kAttributes] = static_cast<std::uint8_t>(attributes >> 8);
  b[L::kAttributes + 1] = static_cast<std::uint8_t>(attributes);
  const std::uint32_t crc = pb::crc32c(pb::ByteView(b).subspan(L::kAttributes));
  for (std::size_t i = 0; i < 4; ++i)
    b[L::kCrc + i] = static_cast<std::uint8_t>(crc >> (24 - 8 * i));
}

}  // namespace

TEST_CASE("build then parse returns the records with offsets base..base+n-1") {
  const std::vector<pb::ProducerRecord> in = {
      {std::string("k1"), std::string("v1")},
      {std::nullopt, std::string("value without key")},
      {std::string("tombstone"), std::nullopt},
      {std::string(""), std::string("")},
      {std::string("big"), std::string(1000, 'x')},  // lengths past one varint byte
  };
  const pb::Bytes batch = pb::build_record_batch(in, 1700000000123, 40);
  const std::vector<pb::ConsumerRecord> out = pb::parse_record_batches(batch);
  REQUIRE(out.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    CAPTURE(i);
    CHECK(out[i].offset == 40 + static_cast<std::int64_t>(i));
    CHECK(out[i].timestamp == 1700000000123);
    CHECK(out[i].key == in[i].key);
    CHECK(out[i].value == in[i].value);
  }
}

TEST_CASE("a single record encodes as Kafka's record layout") {
  const std::vector<pb::ProducerRecord> in = {{std::string("k"), std::string("vv")}};
  const pb::Bytes batch = pb::build_record_batch(in, 0);
  // length 9 (zigzag 18), attributes 0, timestampDelta 0, offsetDelta 0, key len 1 (zigzag 2),
  // "k", value len 2 (zigzag 4), "vv", 0 headers.
  const pb::Bytes record(batch.begin() + L::kHeaderBytes, batch.end());
  CHECK(record == bytes({18, 0, 0, 0, 2, 'k', 4, 'v', 'v', 0}));
}

TEST_CASE("build_record_batch refuses an empty list") {
  CHECK_THROWS_AS(pb::build_record_batch({}, 0), std::invalid_argument);
}

TEST_CASE("parse skips a batch cut short at the end of a fetch response") {
  const std::vector<pb::ProducerRecord> in = {{std::nullopt, std::string("a")}};
  const pb::Bytes one = pb::build_record_batch(in, 0, 0);
  const pb::Bytes two = pb::build_record_batch(in, 0, 1);
  for (std::size_t cut = 1; cut < two.size(); ++cut) {
    CAPTURE(cut);
    pb::Bytes blob = one;
    blob.insert(blob.end(), two.begin(), two.begin() + static_cast<std::ptrdiff_t>(cut));
    const std::vector<pb::ConsumerRecord> out = pb::parse_record_batches(blob);
    REQUIRE(out.size() == 1);
    CHECK(out[0].offset == 0);
  }
}

TEST_CASE("parse rejects a bad CRC and compressed batches, and skips control batches") {
  const std::vector<pb::ProducerRecord> in = {{std::nullopt, std::string("a")}};
  pb::Bytes bad_crc = pb::build_record_batch(in, 0);
  bad_crc.back() ^= 0xFF;
  CHECK(decode_error_kind([&] { pb::parse_record_batches(bad_crc); }) == Kind::corrupt_records);

  pb::Bytes gzip = pb::build_record_batch(in, 0);
  patch_attributes_and_crc(gzip, 0x0001);
  CHECK(decode_error_kind([&] { pb::parse_record_batches(gzip); }) ==
        Kind::unsupported_compression);

  pb::Bytes control = pb::build_record_batch(in, 0);
  patch_attributes_and_crc(control, 0x0030);  // transactional control batch
  CHECK(pb::parse_record_batches(control).empty());
}

TEST_CASE("a malformed record inside a valid-CRC batch is corrupt_records, never out of bounds") {
  const std::vector<pb::ProducerRecord> in = {{std::string("key"), std::string("value")}};
  const pb::Bytes good = pb::build_record_batch(in, 0);
  std::size_t rejected = 0;
  // Damage every record byte, then fix the CRC so the record parser itself must catch it.
  for (std::size_t i = L::kHeaderBytes; i < good.size(); ++i) {
    for (const std::uint8_t v : {0x00, 0x7F, 0xFF}) {
      pb::Bytes bad = good;
      bad[i] = v;
      patch_attributes_and_crc(bad, 0);
      try {
        pb::parse_record_batches(bad);
      } catch (const pb::DecodeError& e) {
        CHECK(e.kind() == Kind::corrupt_records);
        ++rejected;
      }
    }
  }
  CHECK(rejected > 0);
  // A records count the bytes cannot hold.
  pb::Bytes huge = good;
  huge[L::kRecordsCount] = 0x7F;
  patch_attributes_and_crc(huge, 0);
  CHECK(decode_error_kind([&] { pb::parse_record_batches(huge); }) == Kind::corrupt_records);
}
