#include "purgatory/broker/metadata.hpp"

#include <stdexcept>

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::bytes_of;
using pb::test::concat;

namespace {

// A response using every field the version has; the others keep their defaults, which is what
// decoding a version without them yields.
pb::MetadataResponse full_response(std::int16_t v) {
  pb::MetadataResponse r;
  if (v >= 3) r.throttle_time_ms = 5;
  r.brokers = {{1, "localhost", 9092, std::nullopt}, {2, "broker-2.local", 9093, std::nullopt}};
  if (v >= 1) r.brokers[0].rack = "rack-a";
  if (v >= 2) r.cluster_id = "purgatory-demo";
  if (v >= 1) r.controller_id = 1;
  pb::MetadataTopic orders{pb::Errc::none, "orders", false, {}};
  orders.partitions = {{pb::Errc::none, 0, 1, {1, 2}, {1, 2}}, {pb::Errc::none, 1, 2, {2, 1}, {2}}};
  pb::MetadataTopic internal{pb::Errc::none, "__consumer_offsets", v >= 1, {}};
  pb::MetadataTopic missing{pb::Errc::unknown_topic_or_partition, "missing", false, {}};
  r.topics = {orders, internal, missing};
  return r;
}

}  // namespace

TEST_CASE("Metadata request round-trips at v0..v4: named topics and all topics") {
  for (std::int16_t v = 0; v <= 4; ++v) {
    CAPTURE(v);
    pb::MetadataRequest named;
    named.topics = std::vector<std::string>{"orders", "payments"};
    if (v >= 4) named.allow_auto_topic_creation = false;
    CHECK(pb::test::request_round_trip(named, v) == named);

    const pb::MetadataRequest all;  // topics == nullopt
    CHECK(pb::test::request_round_trip(all, v) == all);
  }
}

TEST_CASE("Metadata v1+ tells \"no topics\" (empty) from \"all topics\" (null)") {
  for (std::int16_t v = 1; v <= 4; ++v) {
    CAPTURE(v);
    pb::MetadataRequest none;
    none.topics = std::vector<std::string>{};
    const pb::MetadataRequest back = pb::test::request_round_trip(none, v);
    REQUIRE(back.topics.has_value());
    CHECK(back.topics->empty());
  }
}

TEST_CASE(
    "Metadata v0: an empty topic array means all topics, and \"no topics\" is not encodable") {
  // v0 request, topics = [] (int32 count 0)
  const pb::Bytes payload = bytes({0, 3, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF, 0, 0, 0, 0});
  const pb::Request req = pb::decode_request(payload);
  CHECK_FALSE(std::get<pb::MetadataRequest>(req.body).topics.has_value());

  pb::MetadataRequest none;
  none.topics = std::vector<std::string>{};
  CHECK_THROWS_AS(pb::encode_request(none, 0, 1, std::nullopt), std::invalid_argument);
}

TEST_CASE("Metadata below v4 cannot carry allow_auto_topic_creation = false") {
  pb::MetadataRequest req;
  req.allow_auto_topic_creation = false;
  CHECK_THROWS_AS(pb::encode_request(req, 3, 1, std::nullopt), std::invalid_argument);
  // Decoded below v4 it takes Kafka's default, true.
  CHECK(pb::test::request_round_trip(pb::MetadataRequest{}, 3).allow_auto_topic_creation);
}

TEST_CASE("Metadata request bytes: v1 null topics, v4 one topic without auto-creation") {
  CHECK(pb::encode_request(pb::MetadataRequest{}, 1, 1, std::nullopt) ==
        pb::test::frame(bytes({0, 3, 0, 1, 0, 0, 0, 1, 0xFF, 0xFF,  // header, null client id
                               0xFF, 0xFF, 0xFF, 0xFF})));          // topics: null array
  pb::MetadataRequest one;
  one.topics = std::vector<std::string>{"t"};
  one.allow_auto_topic_creation = false;
  CHECK(pb::encode_request(one, 4, 1, std::nullopt) ==
        pb::test::frame(bytes({0, 3, 0, 4, 0, 0, 0, 1, 0xFF, 0xFF,  // header
                               0, 0, 0, 1, 0, 1, 't',               // topics ["t"]
                               0})));                               // allow_auto_topic_creation
}

TEST_CASE("Metadata response round-trips at v0..v4") {
  for (std::int16_t v = 0; v <= 4; ++v) {
    CAPTURE(v);
    const pb::MetadataResponse resp = full_response(v);
    CHECK(pb::test::response_round_trip(resp, v) == resp);
  }
}

TEST_CASE("Metadata response fields appear in MetadataResponse.json's order per version") {
  pb::MetadataResponse r;
  r.throttle_time_ms = 7;
  r.brokers = {{1, "h", 9092, std::string("r")}};
  r.cluster_id = std::string("c");  // not `= "c"`: g++ 12 -O3 -Wrestrict false positive (PR105651)
  r.controller_id = 1;
  r.topics = {{pb::Errc::none, "t", true, {{pb::Errc::none, 0, 1, {1}, {1}}}}};
  const pb::Bytes partition = bytes({0, 0, 0, 0, 0, 0,          // error_code, partition_index
                                     0, 0, 0, 1,                // leader_id
                                     0, 0, 0, 1, 0, 0, 0, 1,    // replica_nodes [1]
                                     0, 0, 0, 1, 0, 0, 0, 1});  // isr 1
  const pb::Bytes corr = bytes({0, 0, 0, 9});
  const pb::Bytes throttle = bytes({0, 0, 0, 7});
  const pb::Bytes broker_v0 = bytes({0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 'h', 0, 0, 0x23, 0x84});
  const pb::Bytes rack = bytes({0, 1, 'r'});
  const pb::Bytes cluster = bytes({0, 1, 'c'});
  const pb::Bytes controller = bytes({0, 0, 0, 1});
  const pb::Bytes topic_head = bytes({0, 0, 0, 1, 0, 0, 0, 1, 't'});  // count, error, name
  const pb::Bytes internal = bytes({1});
  const pb::Bytes partitions = bytes({0, 0, 0, 1});

  // v0: brokers [node, host, port], topics [error, name, partitions]
  CHECK(pb::encode_response(r, 0, 9) ==
        pb::test::frame(concat({corr, broker_v0, topic_head, partitions, partition})));
  // v1: + rack, controller_id, is_internal
  CHECK(pb::encode_response(r, 1, 9) ==
        pb::test::frame(concat(
            {corr, broker_v0, rack, controller, topic_head, internal, partitions, partition})));
  // v2: + cluster_id between brokers and controller_id
  CHECK(pb::encode_response(r, 2, 9) ==
        pb::test::frame(concat({corr, broker_v0, rack, cluster, controller, topic_head, internal,
                                partitions, partition})));
  // v3 and v4: + throttle_time_ms first
  for (std::int16_t v = 3; v <= 4; ++v) {
    CHECK(pb::encode_response(r, v, 9) ==
          pb::test::frame(concat({corr, throttle, broker_v0, rack, cluster, controller, topic_head,
                                  internal, partitions, partition})));
  }
}
