#include "protocol/header.hpp"

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;

TEST_CASE("request header v1: key, version, correlation id, int16-length client id") {
  pb::Writer w;
  pb::write_request_header(w, {pb::ApiKey::metadata, 4, 0x0A0B0C0D, std::string("kcat")});
  CHECK(w.bytes() == bytes({0, 3, 0, 4, 0x0A, 0x0B, 0x0C, 0x0D, 0, 4, 'k', 'c', 'a', 't'}));
  pb::Reader r(w.bytes());
  const pb::RequestHeader h = pb::read_request_header(r);
  CHECK(h == pb::RequestHeader{pb::ApiKey::metadata, 4, 0x0A0B0C0D, std::string("kcat")});
  CHECK(r.at_end());
}

TEST_CASE("request header v1 with a null client id") {
  pb::Writer w;
  pb::write_request_header(w, {pb::ApiKey::produce, 3, 1, std::nullopt});
  CHECK(w.bytes() == bytes({0, 0, 0, 3, 0, 0, 0, 1, 0xFF, 0xFF}));
  CHECK(static_cast<std::int32_t>(w.size()) == pb::kMinRequestFrameBytes);
}

TEST_CASE("ApiVersions v3+ uses request header v2: tagged fields after the int16 client id") {
  CHECK(pb::request_header_version(pb::ApiKey::api_versions, 2) == 1);
  CHECK(pb::request_header_version(pb::ApiKey::api_versions, 3) == 2);
  CHECK(pb::request_header_version(pb::ApiKey::api_versions, 4) == 2);
  CHECK(pb::request_header_version(pb::ApiKey::metadata, 4) == 1);

  pb::Writer w;
  pb::write_request_header(w, {pb::ApiKey::api_versions, 3, 1, std::string("a")});
  CHECK(w.bytes() == bytes({0, 18, 0, 3, 0, 0, 0, 1, 0, 1, 'a', 0}));

  // A tagged field sent by a newer client is skipped.
  const pb::Bytes with_tag = bytes({0, 18, 0, 3, 0, 0, 0, 1, 0, 1, 'a', 1, 0, 1, 0x55});
  pb::Reader r(with_tag);
  CHECK(pb::read_request_header(r).client_id == std::optional<std::string>("a"));
  CHECK(r.at_end());
}

TEST_CASE("an unknown api key still yields its correlation id") {
  const pb::Bytes data = bytes({0, 99, 0, 0, 0, 0, 0, 42, 0xFF, 0xFF});
  pb::Reader r(data);
  const pb::RequestHeader h = pb::read_request_header(r);
  CHECK(static_cast<int>(h.api_key) == 99);
  CHECK(h.correlation_id == 42);
}

TEST_CASE("response header v0 is the correlation id alone") {
  pb::Writer w;
  pb::write_response_header(w, -5);
  CHECK(w.bytes() == bytes({0xFF, 0xFF, 0xFF, 0xFB}));
  pb::Reader r(w.bytes());
  CHECK(pb::read_response_header(r) == -5);
}
