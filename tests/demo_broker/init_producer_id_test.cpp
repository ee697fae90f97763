#include "protocol/init_producer_id.hpp"

#include <stdexcept>

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::bytes_of;
using pb::test::concat;

TEST_CASE("InitProducerId request and response round-trip at v0..v5") {
  for (std::int16_t v = 0; v <= 5; ++v) {
    CAPTURE(v);
    pb::InitProducerIdRequest idempotent;  // null transactional id
    idempotent.transaction_timeout_ms = 60000;
    if (v >= 3) {
      idempotent.producer_id = 1234;
      idempotent.producer_epoch = 2;
    }
    CHECK(pb::test::request_round_trip(idempotent, v) == idempotent);
    pb::InitProducerIdRequest transactional;
    transactional.transactional_id = "orders-txn";
    CHECK(pb::test::request_round_trip(transactional, v) == transactional);

    const pb::InitProducerIdResponse resp{25, pb::Errc::none, 1726000000000, 3};
    CHECK(pb::test::response_round_trip(resp, v) == resp);
  }
}

TEST_CASE("InitProducerId v0 and v1: classic strings, request header v1, response header v0") {
  pb::InitProducerIdRequest req;
  req.transaction_timeout_ms = 60000;
  CHECK(pb::encode_request(req, 1, 7, std::string("p")) ==
        pb::test::frame(bytes({0, 22, 0, 1, 0, 0, 0, 7, 0, 1, 'p',  // header v1
                               0xFF, 0xFF,                          // transactional_id: null
                               0, 0, 0xEA, 0x60})));                // 60000 ms
  const pb::InitProducerIdResponse resp{0, pb::Errc::none, 5, 0};
  CHECK(pb::encode_response(resp, 0, 7) ==
        pb::test::frame(bytes({0, 0, 0, 7,              // header v0: correlation id alone
                               0, 0, 0, 0, 0, 0,        // throttle, error
                               0, 0, 0, 0, 0, 0, 0, 5,  // producer id
                               0, 0})));                // epoch
}

TEST_CASE("InitProducerId v4 (kafka-ts, librdkafka): flexible, header v2 request, v1 response") {
  pb::InitProducerIdRequest req;
  req.transaction_timeout_ms = 0;
  const pb::Bytes expected = concat({
      bytes({0, 0, 0, 35}),                             // size
      bytes({0, 22, 0, 4, 0, 0, 0, 3}),                 // api key 22, version 4, correlation id 3
      bytes({0, 8}), bytes_of("kafka-ts"), bytes({0}),  // header tagged fields
      bytes({0}),                                       // transactional_id: compact null
      bytes({0, 0, 0, 0}),                              // transaction_timeout_ms
      bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}),  // producer_id -1
      bytes({0xFF, 0xFF}),                                      // producer_epoch -1
      bytes({0}),                                               // body tagged fields
  });
  CHECK(pb::encode_request(req, 4, 3, std::string("kafka-ts")) == expected);
  const pb::Request decoded = pb::decode_request(pb::test::payload_of(expected));
  CHECK(std::get<pb::InitProducerIdRequest>(decoded.body) == req);

  const pb::InitProducerIdResponse resp{0, pb::Errc::transactional_id_authorization_failed, -1, -1};
  CHECK(pb::encode_response(resp, 4, 3) ==
        pb::test::frame(bytes({0,    0,    0,    3,    0,         // header v1: tagged fields
                               0,    0,    0,    0,    0,    53,  // throttle, error 53
                               0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                               0xFF, 0xFF, 0xFF, 0xFF, 0})));  // body tagged fields
  // A tag a newer broker sends in the response header is skipped.
  const pb::Bytes tagged =
      bytes({0, 0, 0, 3, 1, 0, 1, 0x55, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0});
  CHECK(pb::decode_response<pb::InitProducerIdResponse>(tagged, 4).body.producer_id == 9);
}

TEST_CASE("InitProducerId below v3 cannot carry a producer id") {
  pb::InitProducerIdRequest req;
  req.producer_id = 5;
  CHECK_THROWS_AS(pb::encode_request(req, 2, 1, std::nullopt), std::invalid_argument);
}

TEST_CASE("InitProducerId v2+ is flexible, earlier versions and other apis' versions are not") {
  CHECK_FALSE(pb::is_flexible(pb::ApiKey::init_producer_id, 1));
  CHECK(pb::is_flexible(pb::ApiKey::init_producer_id, 2));
  CHECK(pb::request_header_version(pb::ApiKey::init_producer_id, 2) == 2);
  CHECK(pb::response_header_version(pb::ApiKey::init_producer_id, 2) == 1);
  CHECK(pb::response_header_version(pb::ApiKey::api_versions, 3) == 0);  // always v0
  CHECK_FALSE(pb::is_flexible(pb::ApiKey::metadata, 8));
  CHECK(pb::is_flexible(pb::ApiKey::metadata, 9));  // not decoded, but its header is read right
}
