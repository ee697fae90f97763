#include "protocol/wire.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::decode_error_kind;
using Kind = pb::DecodeErrorKind;

TEST_CASE("Writer writes fixed-width integers big-endian") {
  pb::Writer w;
  w.write_int8(-2);
  w.write_int16(0x0102);
  w.write_int32(-2);
  w.write_int64(0x0102030405060708);
  w.write_uint32(0xE3069283U);
  w.write_bool(true);
  CHECK(w.bytes() == bytes({0xFE, 0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFE, 1,    2,    3,
                            4,    5,    6,    7,    8,    0xE3, 0x06, 0x92, 0x83, 0x01}));

  pb::Reader r(w.bytes());
  CHECK(r.read_int8("a") == -2);
  CHECK(r.read_int16("b") == 0x0102);
  CHECK(r.read_int32("c") == -2);
  CHECK(r.read_int64("d") == 0x0102030405060708);
  CHECK(r.read_uint32("e") == 0xE3069283U);
  CHECK(r.read_bool("f"));
  CHECK(r.at_end());
}

TEST_CASE("extreme integer values round-trip") {
  pb::Writer w;
  w.write_int16(std::numeric_limits<std::int16_t>::min());
  w.write_int32(std::numeric_limits<std::int32_t>::min());
  w.write_int64(std::numeric_limits<std::int64_t>::min());
  w.write_int64(std::numeric_limits<std::int64_t>::max());
  pb::Reader r(w.bytes());
  CHECK(r.read_int16("a") == std::numeric_limits<std::int16_t>::min());
  CHECK(r.read_int32("b") == std::numeric_limits<std::int32_t>::min());
  CHECK(r.read_int64("c") == std::numeric_limits<std::int64_t>::min());
  CHECK(r.read_int64("d") == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("strings: int16 length, -1 is null, empty is not null") {
  pb::Writer w;
  w.write_string("abc");
  w.write_nullable_string(std::nullopt);
  w.write_nullable_string(std::string());
  CHECK(w.bytes() == bytes({0, 3, 'a', 'b', 'c', 0xFF, 0xFF, 0, 0}));
  pb::Reader r(w.bytes());
  CHECK(r.read_string("s") == "abc");
  CHECK(r.read_nullable_string("n") == std::nullopt);
  CHECK(r.read_nullable_string("e") == std::optional<std::string>(""));
  CHECK(r.at_end());
}

TEST_CASE("nullable bytes: int32 length, -1 is null") {
  pb::Writer w;
  w.write_nullable_bytes(std::nullopt);
  w.write_nullable_bytes(bytes({9, 8}));
  CHECK(w.bytes() == bytes({0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 2, 9, 8}));
  pb::Reader r(w.bytes());
  CHECK(r.read_nullable_bytes("n") == std::nullopt);
  CHECK(r.read_nullable_bytes("b") == std::optional<pb::Bytes>(bytes({9, 8})));
}

TEST_CASE("unsigned varints match the LEB128 encoding Kafka uses") {
  pb::Writer w;
  w.write_uvarint(0);
  w.write_uvarint(127);
  w.write_uvarint(300);
  w.write_uvarint(0xFFFFFFFFU);
  CHECK(w.bytes() == bytes({0x00, 0x7F, 0xAC, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F}));
  pb::Reader r(w.bytes());
  CHECK(r.read_uvarint("a") == 0);
  CHECK(r.read_uvarint("b") == 127);
  CHECK(r.read_uvarint("c") == 300);
  CHECK(r.read_uvarint("d") == 0xFFFFFFFFU);
}

TEST_CASE("zigzag varints: 0,-1,1,-2 encode as 0,1,2,3 and extremes round-trip") {
  pb::Writer w;
  for (std::int32_t v : {0, -1, 1, -2})
    w.write_varint(v);
  CHECK(w.bytes() == bytes({0, 1, 2, 3}));

  pb::Writer w2;
  w2.write_varint(std::numeric_limits<std::int32_t>::min());
  w2.write_varint(std::numeric_limits<std::int32_t>::max());
  w2.write_varlong(std::numeric_limits<std::int64_t>::min());
  w2.write_varlong(std::numeric_limits<std::int64_t>::max());
  w2.write_varlong(-300);
  pb::Reader r(w2.bytes());
  CHECK(r.read_varint("a") == std::numeric_limits<std::int32_t>::min());
  CHECK(r.read_varint("b") == std::numeric_limits<std::int32_t>::max());
  CHECK(r.read_varlong("c") == std::numeric_limits<std::int64_t>::min());
  CHECK(r.read_varlong("d") == std::numeric_limits<std::int64_t>::max());
  CHECK(r.read_varlong("e") == -300);
  CHECK(r.at_end());
}

TEST_CASE("varints longer than their type are bad_varint") {
  const pb::Bytes six = bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x01});
  CHECK(decode_error_kind([&] { pb::Reader(six).read_uvarint("v"); }) == Kind::bad_varint);
  // 5th byte carrying more than the 4 bits a uint32 has left.
  const pb::Bytes high = bytes({0xFF, 0xFF, 0xFF, 0xFF, 0x1F});
  CHECK(decode_error_kind([&] { pb::Reader(high).read_uvarint("v"); }) == Kind::bad_varint);
  const pb::Bytes eleven = bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0});
  CHECK(decode_error_kind([&] { pb::Reader(eleven).read_varlong("v"); }) == Kind::bad_varint);
  const pb::Bytes cut = bytes({0x80, 0x80});
  CHECK(decode_error_kind([&] { pb::Reader(cut).read_uvarint("v"); }) == Kind::truncated);
}

TEST_CASE("compact strings and arrays carry length + 1 and tagged fields are skipped") {
  pb::Writer w;
  w.write_compact_string("kcat");
  w.write_compact_array_count(2);
  w.write_empty_tagged_fields();
  CHECK(w.bytes() == bytes({5, 'k', 'c', 'a', 't', 3, 0}));

  // Two tagged fields (tag 0 with 2 bytes, tag 5 with 0 bytes), then a sentinel int8.
  const pb::Bytes tagged = bytes({2, 0, 2, 0xAA, 0xBB, 5, 0, 0x7F});
  pb::Reader r(tagged);
  r.skip_tagged_fields("t");
  CHECK(r.read_int8("sentinel") == 0x7F);

  const pb::Bytes null_string = bytes({0});
  CHECK(decode_error_kind([&] { pb::Reader(null_string).read_compact_string("s"); }) ==
        Kind::negative_length);
  CHECK(pb::Reader(null_string).read_compact_nullable_string("s") == std::nullopt);
  const pb::Bytes long_string = bytes({10, 'a'});
  CHECK(decode_error_kind([&] { pb::Reader(long_string).read_compact_string("s"); }) ==
        Kind::truncated);
  const pb::Bytes tag_past_end = bytes({1, 0, 9, 1});
  CHECK(decode_error_kind([&] { pb::Reader(tag_past_end).skip_tagged_fields("t"); }) ==
        Kind::truncated);
}

TEST_CASE("every fixed-width read checks the bytes remaining") {
  const pb::Bytes three = bytes({1, 2, 3});
  CHECK(decode_error_kind([&] { pb::Reader(three).read_int32("x"); }) == Kind::truncated);
  CHECK(decode_error_kind([&] { pb::Reader(three).read_int64("x"); }) == Kind::truncated);
  CHECK(decode_error_kind([&] { pb::Reader(three).read_raw(4, "x"); }) == Kind::truncated);
  const pb::Bytes empty;
  CHECK(decode_error_kind([&] { pb::Reader(empty).read_int8("x"); }) == Kind::truncated);
}

TEST_CASE("a negative string length is negative_length, -1 allowed only where nullable") {
  const pb::Bytes minus_two = bytes({0xFF, 0xFE, 'a'});
  CHECK(decode_error_kind([&] { pb::Reader(minus_two).read_string("s"); }) ==
        Kind::negative_length);
  CHECK(decode_error_kind([&] { pb::Reader(minus_two).read_nullable_string("s"); }) ==
        Kind::negative_length);
  const pb::Bytes minus_one = bytes({0xFF, 0xFF});
  CHECK(decode_error_kind([&] { pb::Reader(minus_one).read_string("s"); }) ==
        Kind::negative_length);
  const pb::Bytes bytes_minus_two = bytes({0xFF, 0xFF, 0xFF, 0xFE});
  CHECK(decode_error_kind([&] { pb::Reader(bytes_minus_two).read_nullable_bytes("b"); }) ==
        Kind::negative_length);
}

TEST_CASE("a string longer than the frame is rejected before allocation, naming field and value") {
  const pb::Bytes data = bytes({0x7F, 0xFF, 'a', 'b'});
  const std::string msg =
      pb::test::decode_error_message([&] { pb::Reader(data).read_string("metadata.topics[]"); });
  CHECK(msg == "metadata.topics[]: length 32767 exceeds the 2 bytes remaining (at byte 2)");
  const pb::Bytes big_bytes = bytes({0x7F, 0xFF, 0xFF, 0xFF, 1});
  CHECK(decode_error_kind([&] { pb::Reader(big_bytes).read_nullable_bytes("records"); }) ==
        Kind::truncated);
}

TEST_CASE("array counts: negative is negative_length, more than the bytes can hold is bad_count") {
  const pb::Bytes minus_two = bytes({0xFF, 0xFF, 0xFF, 0xFE});
  CHECK(decode_error_kind([&] { pb::Reader(minus_two).read_array_count("a", 4); }) ==
        Kind::negative_length);
  CHECK(decode_error_kind([&] { pb::Reader(minus_two).read_nullable_array_count("a", 4); }) ==
        Kind::negative_length);
  const pb::Bytes minus_one = bytes({0xFF, 0xFF, 0xFF, 0xFF});
  CHECK(decode_error_kind([&] { pb::Reader(minus_one).read_array_count("a", 4); }) ==
        Kind::negative_length);
  CHECK(pb::Reader(minus_one).read_nullable_array_count("a", 4) == std::nullopt);

  // 2 elements of at least 4 bytes cannot fit in the 7 bytes that follow; 1 can.
  const pb::Bytes two_in_seven = bytes({0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7});
  CHECK(decode_error_kind([&] { pb::Reader(two_in_seven).read_array_count("a", 4); }) ==
        Kind::bad_count);
  const pb::Bytes one_in_seven = bytes({0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7});
  CHECK(pb::Reader(one_in_seven).read_array_count("a", 4) == 1);

  const pb::Bytes huge = bytes({0x7F, 0xFF, 0xFF, 0xFF});
  const std::string msg = pb::test::decode_error_message(
      [&] { pb::Reader(huge).read_array_count("produce.topics", 6); });
  CHECK(msg ==
        "produce.topics: array count 2147483647 needs at least 12884901882 bytes, 0 remain "
        "(at byte 4)");
}

TEST_CASE("read_array reads exactly count elements and int32 arrays round-trip") {
  pb::Writer w;
  pb::write_int32_array(w, {1, -1, 7});
  pb::Reader r(w.bytes());
  CHECK(pb::read_int32_array(r, "replicas") == std::vector<std::int32_t>{1, -1, 7});
  CHECK(r.at_end());
}

TEST_CASE("expect_end reports trailing bytes") {
  const pb::Bytes data = bytes({1, 2, 3});
  pb::Reader r(data);
  r.read_int8("x");
  CHECK(decode_error_kind([&] { r.expect_end("Metadata v1 request"); }) == Kind::trailing_bytes);
}

TEST_CASE("Writer refuses values that do not fit their length prefix") {
  pb::Writer w;
  CHECK_THROWS_AS(w.write_string(std::string(40000, 'x')), std::length_error);
  CHECK(w.size() == 0);
}
