#include "protocol/codec.hpp"

#include <stdexcept>

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::decode_error_kind;
using Kind = pb::DecodeErrorKind;

TEST_CASE("decode_request dispatches on the api key") {
  const auto kind_of = [](const pb::Bytes& frame) {
    return pb::decode_request(pb::test::payload_of(frame)).body.index();
  };
  CHECK(kind_of(pb::encode_request(pb::ProduceRequest{}, 3, 1, std::nullopt)) == 0);
  CHECK(kind_of(pb::encode_request(pb::FetchRequest{}, 4, 1, std::nullopt)) == 1);
  CHECK(kind_of(pb::encode_request(pb::ListOffsetsRequest{}, 1, 1, std::nullopt)) == 2);
  CHECK(kind_of(pb::encode_request(pb::MetadataRequest{}, 4, 1, std::nullopt)) == 3);
  CHECK(kind_of(pb::encode_request(pb::ApiVersionsRequest{}, 0, 1, std::nullopt)) == 4);
}

TEST_CASE("an unknown api key is unsupported_api, after the header was read") {
  const pb::Bytes payload = bytes({0, 99, 0, 0, 0, 0, 0, 42, 0xFF, 0xFF, 1, 2, 3});
  pb::Reader r(payload);
  const pb::RequestHeader h = pb::read_request_header(r);
  CHECK(h.correlation_id == 42);
  try {
    pb::decode_request_body(h, r);
    FAIL("expected DecodeError");
  } catch (const pb::DecodeError& e) {
    CHECK(e.kind() == Kind::unsupported_api);
    CHECK(e.kafka_error() == pb::Errc::unsupported_version);
    CHECK(std::string(e.what()) == "request_header.api_key: 99 is not supported");
  }
}

TEST_CASE("unsupported versions are unsupported_version, with the correlation id in hand") {
  struct Case {
    int key;
    int version;
  };
  // Produce v2 and v7, Fetch v3 and v11, ListOffsets v0 and v2, Metadata v9 (flexible: header
  // v2), ApiVersions v4, InitProducerId v6.
  for (const Case c : {Case{0, 2}, Case{0, 7}, Case{1, 3}, Case{1, 11}, Case{2, 0}, Case{2, 2},
                       Case{3, 9}, Case{18, 4}, Case{3, -1}, Case{22, 6}}) {
    CAPTURE(c.key);
    CAPTURE(c.version);
    pb::Writer w;
    pb::write_request_header(w, {static_cast<pb::ApiKey>(c.key),
                                 static_cast<std::int16_t>(c.version), 77, std::string("c")});
    w.write_int32(0);  // some body bytes this codec will not read
    pb::Reader r(w.bytes());
    const pb::RequestHeader h = pb::read_request_header(r);
    CHECK(h.correlation_id == 77);
    CHECK(decode_error_kind([&] { pb::decode_request_body(h, r); }) == Kind::unsupported_version);
  }
}

TEST_CASE("ApiVersions v4 from a newer client: header v2 parsed, body refused as unsupported") {
  // librdkafka-style v4 header with tagged fields, then a v4 body we do not know.
  const pb::Bytes payload =
      bytes({0, 18, 0, 4, 0, 0, 0, 3, 0, 1, 'x', 0, /* body */ 2, 'a', 2, 'b', 0});
  pb::Reader r(payload);
  const pb::RequestHeader h = pb::read_request_header(r);
  CHECK(h.api_key == pb::ApiKey::api_versions);
  CHECK(h.correlation_id == 3);
  CHECK(decode_error_kind([&] { pb::decode_request_body(h, r); }) == Kind::unsupported_version);

  // The answer Kafka gives: an ApiVersions v0 response with UNSUPPORTED_VERSION and the table.
  pb::ApiVersionsResponse answer{pb::Errc::unsupported_version, pb::broker_api_versions(), 0};
  const auto back = pb::decode_response<pb::ApiVersionsResponse>(
      pb::test::payload_of(pb::encode_response(answer, 0, h.correlation_id)), 0);
  CHECK(back.correlation_id == 3);
  CHECK(back.body == answer);
}

TEST_CASE("bytes after a complete request are trailing_bytes") {
  pb::Bytes payload =
      pb::test::payload_of(pb::encode_request(pb::MetadataRequest{}, 1, 1, std::nullopt));
  payload.push_back(0);
  CHECK(decode_error_kind([&] { pb::decode_request(payload); }) == Kind::trailing_bytes);

  pb::Bytes resp = pb::test::payload_of(pb::encode_response(pb::ListOffsetsResponse{}, 1, 1));
  resp.push_back(0);
  CHECK(decode_error_kind([&] { pb::decode_response<pb::ListOffsetsResponse>(resp, 1); }) ==
        Kind::trailing_bytes);
}

TEST_CASE("encoders refuse versions outside the codec with std::invalid_argument") {
  CHECK_THROWS_AS(pb::encode_request(pb::ProduceRequest{}, 2, 1, std::nullopt),
                  std::invalid_argument);
  CHECK_THROWS_AS(pb::encode_request(pb::MetadataRequest{}, 9, 1, std::nullopt),
                  std::invalid_argument);
  CHECK_THROWS_AS(pb::encode_response(pb::FetchResponse{}, 5, 1), std::invalid_argument);
  CHECK_THROWS_AS(pb::encode_response(pb::ApiVersionsResponse{}, 4, 1), std::invalid_argument);
  const pb::Bytes payload = bytes({0, 0, 0, 1});
  CHECK_THROWS_AS(pb::decode_response<pb::ProduceResponse>(payload, 8), std::invalid_argument);
}

TEST_CASE("DecodeError maps to the Kafka error a broker would report") {
  CHECK(pb::DecodeError(Kind::corrupt_records, "x").kafka_error() == pb::Errc::corrupt_message);
  CHECK(pb::DecodeError(Kind::unsupported_version, "x").kafka_error() ==
        pb::Errc::unsupported_version);
  CHECK(pb::DecodeError(Kind::truncated, "x").kafka_error() == pb::Errc::invalid_request);
  CHECK(pb::errc_name(pb::Errc::corrupt_message) == "CORRUPT_MESSAGE");
  CHECK(pb::errc_name(static_cast<pb::Errc>(1234)) == "ERROR_CODE(1234)");
  CHECK(static_cast<int>(pb::Errc::none) == 0);
  CHECK(static_cast<int>(pb::Errc::offset_out_of_range) == 1);
  CHECK(static_cast<int>(pb::Errc::corrupt_message) == 2);
  CHECK(static_cast<int>(pb::Errc::unknown_topic_or_partition) == 3);
  CHECK(static_cast<int>(pb::Errc::request_timed_out) == 7);
  CHECK(static_cast<int>(pb::Errc::invalid_required_acks) == 21);
  CHECK(static_cast<int>(pb::Errc::unsupported_version) == 35);
  CHECK(static_cast<int>(pb::Errc::invalid_request) == 42);
}
