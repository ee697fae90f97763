#include "protocol/crc32c.hpp"

#include <string_view>

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;

TEST_CASE("CRC-32C check value: crc32c(\"123456789\") == 0xE3069283") {
  CHECK(pb::crc32c(pb::test::bytes_of("123456789")) == 0xE3069283U);
}

TEST_CASE("CRC-32C of nothing is 0, of 32 zero bytes is 0x8A9136AA (RFC 3720 B.4)") {
  CHECK(pb::crc32c({}) == 0U);
  const pb::Bytes zeros(32, 0);
  CHECK(pb::crc32c(zeros) == 0x8A9136AAU);
  const pb::Bytes ones(32, 0xFF);
  CHECK(pb::crc32c(ones) == 0x62A8AB43U);
}
