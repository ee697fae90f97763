#include "protocol/framing.hpp"

#include <array>

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::decode_error_kind;
using Kind = pb::DecodeErrorKind;

namespace {

std::array<std::uint8_t, 4> prefix(std::uint32_t size) {
  return {static_cast<std::uint8_t>(size >> 24), static_cast<std::uint8_t>(size >> 16),
          static_cast<std::uint8_t>(size >> 8), static_cast<std::uint8_t>(size)};
}

}  // namespace

TEST_CASE("frame size: accepted from the minimum request (10 bytes) up to 100 MiB") {
  CHECK(pb::kDefaultMaxFrameBytes == 104857600);
  CHECK(pb::decode_frame_size(prefix(10)) == 10);
  CHECK(pb::decode_frame_size(prefix(104857600)) == 104857600);
}

TEST_CASE("frame size: negative, zero, too small and oversized are bad_frame_size") {
  CHECK(decode_error_kind([] { pb::decode_frame_size(prefix(0xFFFFFFFFU)); }) ==
        Kind::bad_frame_size);
  CHECK(decode_error_kind([] { pb::decode_frame_size(prefix(0x80000000U)); }) ==
        Kind::bad_frame_size);
  CHECK(decode_error_kind([] { pb::decode_frame_size(prefix(0)); }) == Kind::bad_frame_size);
  CHECK(decode_error_kind([] { pb::decode_frame_size(prefix(9)); }) == Kind::bad_frame_size);
  CHECK(decode_error_kind([] { pb::decode_frame_size(prefix(104857601)); }) ==
        Kind::bad_frame_size);
  CHECK(pb::test::decode_error_message([] { pb::decode_frame_size(prefix(104857601)); }) ==
        "frame size: 104857601 exceeds the maximum of 104857600 bytes");
  // A configured maximum wins over the default; responses may be as small as 4 bytes.
  CHECK(decode_error_kind([] { pb::decode_frame_size(prefix(2000), 1000); }) ==
        Kind::bad_frame_size);
  CHECK(pb::decode_frame_size(prefix(4), 1000, pb::kMinResponseFrameBytes) == 4);
}

TEST_CASE("finish_frame writes the payload size and frame_payload checks it") {
  pb::Writer w = pb::begin_frame();
  w.write_int32(42);
  w.write_int16(7);
  const pb::Bytes frame = pb::finish_frame(std::move(w));
  CHECK(frame == pb::test::bytes({0, 0, 0, 6, 0, 0, 0, 42, 0, 7}));
  CHECK(pb::frame_payload(frame).size() == 6);

  pb::Bytes short_frame = frame;
  short_frame.pop_back();
  CHECK(decode_error_kind([&] { pb::frame_payload(short_frame); }) == Kind::truncated);
  pb::Bytes long_frame = frame;
  long_frame.push_back(0);
  CHECK(decode_error_kind([&] { pb::frame_payload(long_frame); }) == Kind::trailing_bytes);
  const pb::Bytes three = pb::test::bytes({0, 0, 0});
  CHECK(decode_error_kind([&] { pb::frame_payload(three); }) == Kind::truncated);
}
