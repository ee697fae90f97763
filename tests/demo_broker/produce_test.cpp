#include "protocol/produce.hpp"

#include <doctest/doctest.h>

#include "protocol/records.hpp"
#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::concat;

TEST_CASE("Produce v3 and v4 requests round-trip, records blob and null records included") {
  const std::vector<pb::ProducerRecord> recs = {{std::string("k"), std::string("v")}};
  pb::ProduceRequest req;
  req.transactional_id = std::nullopt;
  req.acks = -1;
  req.timeout_ms = 1500;
  req.topics = {{"orders", {{0, pb::build_record_batch(recs, 1700000000000)}, {1, std::nullopt}}},
                {"payments", {{3, pb::Bytes{}}}}};
  CHECK(pb::test::request_round_trip(req, 3) == req);

  req.transactional_id = "txn-1";
  req.acks = 0;
  CHECK(pb::test::request_round_trip(req, 3) == req);
}

TEST_CASE("Produce v3 request bytes follow ProduceRequest.json") {
  pb::ProduceRequest req;
  req.acks = 1;
  req.timeout_ms = 1000;
  req.topics = {{"t", {{2, bytes({0xAB, 0xCD})}}}};
  CHECK(pb::encode_request(req, 3, 5, std::nullopt) ==
        pb::test::frame(bytes({0,    0,    0, 3, 0,    0,    0,   5, 0xFF, 0xFF,  // header
                               0xFF, 0xFF,                            // transactional_id null
                               0,    1,    0, 0, 0x03, 0xE8,          // acks 1, timeout 1000
                               0,    0,    0, 1, 0,    1,    't',     // topics [name "t"
                               0,    0,    0, 1, 0,    0,    0,   2,  //   partitions [index 2
                               0,    0,    0, 2, 0xAB, 0xCD})));      //   records (2 bytes)]]
}

TEST_CASE("Produce v3 and v4 responses round-trip and follow ProduceResponse.json") {
  pb::ProduceResponse resp;
  resp.responses = {
      {"orders", {{0, pb::Errc::none, 42, -1}, {1, pb::Errc::corrupt_message, -1, -1}}},
      {"missing", {{0, pb::Errc::unknown_topic_or_partition, -1, -1}}}};
  resp.throttle_time_ms = 3;
  CHECK(pb::test::response_round_trip(resp, 3) == resp);
  CHECK(pb::test::response_round_trip(resp, 4) == resp);

  pb::ProduceResponse one;
  one.responses = {{"t", {{0, pb::Errc::none, 7, -1}}}};
  CHECK(pb::encode_response(one, 3, 1) ==
        pb::test::frame(concat({bytes({0, 0, 0, 1}),                    // correlation_id
                                bytes({0, 0, 0, 1, 0, 1, 't'}),         // responses [name
                                bytes({0, 0, 0, 1, 0, 0, 0, 0, 0, 0}),  //  [index 0, error 0,
                                bytes({0, 0, 0, 0, 0, 0, 0, 7}),        //   base_offset 7,
                                bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}),  // -1
                                bytes({0, 0, 0, 0})})));  // throttle_time_ms
}

TEST_CASE(
    "Produce v4 (what kafka-python sends to a broker it takes for Kafka 1.0) is v3's layout") {
  pb::ProduceRequest req;
  req.acks = -1;
  req.topics = {{"t", {{0, bytes({1, 2, 3})}}}};
  pb::Bytes v3 = pb::encode_request(req, 3, 5, std::nullopt);
  pb::Bytes v4 = pb::encode_request(req, 4, 5, std::nullopt);
  v3[7] = 4;  // the header's api_version, the only byte that differs
  CHECK(v3 == v4);
  CHECK(pb::test::request_round_trip(req, 4) == req);
  pb::ProduceResponse resp;
  resp.responses = {{"t", {{0, pb::Errc::none, 7, -1}}}};
  CHECK(pb::encode_response(resp, 4, 1) == pb::encode_response(resp, 3, 1));
}
