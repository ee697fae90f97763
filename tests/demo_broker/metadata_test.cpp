#include "protocol/metadata.hpp"

#include <stdexcept>

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::bytes_of;
using pb::test::concat;

namespace {

pb::MetadataPartition partition(std::int32_t index, std::int32_t leader,
                                std::vector<std::int32_t> replicas, std::vector<std::int32_t> isr) {
  pb::MetadataPartition p;
  p.partition_index = index;
  p.leader_id = leader;
  p.replica_nodes = std::move(replicas);
  p.isr_nodes = std::move(isr);
  return p;
}

pb::MetadataTopic topic(pb::Errc error, std::string name, bool internal,
                        std::vector<pb::MetadataPartition> partitions) {
  pb::MetadataTopic t;
  t.error_code = error;
  t.name = std::move(name);
  t.is_internal = internal;
  t.partitions = std::move(partitions);
  return t;
}

// A response using every field the version has; the others keep their defaults, which is what
// decoding a version without them yields.
pb::MetadataResponse full_response(std::int16_t v) {
  pb::MetadataResponse r;
  if (v >= 3) r.throttle_time_ms = 5;
  r.brokers = {{1, "localhost", 9092, std::nullopt}, {2, "broker-2.local", 9093, std::nullopt}};
  if (v >= 1) r.brokers[0].rack = "rack-a";
  if (v >= 2) r.cluster_id = "purgatory-demo";
  if (v >= 1) r.controller_id = 1;
  pb::MetadataTopic orders = topic(pb::Errc::none, "orders", false,
                                   {partition(0, 1, {1, 2}, {1, 2}), partition(1, 2, {2, 1}, {2})});
  if (v >= 5) orders.partitions[1].offline_replicas = {1};
  if (v >= 7) orders.partitions[0].leader_epoch = 4;
  if (v >= 8) orders.topic_authorized_operations = 0x0DF8;
  const pb::MetadataTopic internal = topic(pb::Errc::none, "__consumer_offsets", v >= 1, {});
  const pb::MetadataTopic missing =
      topic(pb::Errc::unknown_topic_or_partition, "missing", false, {});
  r.topics = {orders, internal, missing};
  if (v >= 8) r.cluster_authorized_operations = 0x1FA0;
  return r;
}

}  // namespace

TEST_CASE("Metadata request round-trips at v0..v8: named topics and all topics") {
  for (std::int16_t v = 0; v <= 8; ++v) {
    CAPTURE(v);
    pb::MetadataRequest named;
    named.topics = std::vector<std::string>{"orders", "payments"};
    if (v >= 4) named.allow_auto_topic_creation = false;
    if (v >= 8) named.include_topic_authorized_operations = true;
    CHECK(pb::test::request_round_trip(named, v) == named);

    const pb::MetadataRequest all;  // topics == nullopt
    CHECK(pb::test::request_round_trip(all, v) == all);
  }
}

TEST_CASE("Metadata v1+ tells \"no topics\" (empty) from \"all topics\" (null)") {
  for (std::int16_t v = 1; v <= 8; ++v) {
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

TEST_CASE("Metadata response round-trips at v0..v8") {
  for (std::int16_t v = 0; v <= 8; ++v) {
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
  r.topics = {topic(pb::Errc::none, "t", true, {partition(0, 1, {1}, {1})})};
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

TEST_CASE("Metadata v5..v8 responses: offline_replicas, leader_epoch, authorized operations") {
  pb::MetadataResponse r;
  r.throttle_time_ms = 7;
  r.brokers = {{1, "h", 9092, std::string("r")}};
  r.cluster_id = std::string("c");
  r.controller_id = 1;
  pb::MetadataTopic t = topic(pb::Errc::none, "t", true, {partition(0, 1, {1}, {1})});
  t.partitions[0].offline_replicas = {2};
  t.partitions[0].leader_epoch = 3;
  t.topic_authorized_operations = 0x0DF8;
  r.topics = {t};
  r.cluster_authorized_operations = 0x1FA0;
  const pb::Bytes head = concat({bytes({0, 0, 0, 9}),  // correlation id
                                 bytes({0, 0, 0, 7}),  // throttle_time_ms
                                 bytes({0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 'h', 0, 0, 0x23, 0x84}),
                                 bytes({0, 1, 'r'}), bytes({0, 1, 'c'}), bytes({0, 0, 0, 1}),
                                 bytes({0, 0, 0, 1, 0, 0, 0, 1, 't', 1}),  // topic, internal
                                 bytes({0, 0, 0, 1})});                    // one partition
  const pb::Bytes index_leader = bytes({0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  const pb::Bytes epoch = bytes({0, 0, 0, 3});
  const pb::Bytes replicas_isr = bytes({0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1});
  const pb::Bytes offline = bytes({0, 0, 0, 1, 0, 0, 0, 2});
  const pb::Bytes topic_ops = bytes({0, 0, 0x0D, 0xF8});
  const pb::Bytes cluster_ops = bytes({0, 0, 0x1F, 0xA0});
  // v5 and v6: offline_replicas after isr_nodes.
  for (std::int16_t v = 5; v <= 6; ++v) {
    CAPTURE(v);
    CHECK(pb::encode_response(r, v, 9) ==
          pb::test::frame(concat({head, index_leader, replicas_isr, offline})));
  }
  // v7: leader_epoch after leader_id.
  CHECK(pb::encode_response(r, 7, 9) ==
        pb::test::frame(concat({head, index_leader, epoch, replicas_isr, offline})));
  // v8: topic_authorized_operations after the partitions, cluster_authorized_operations last.
  CHECK(pb::encode_response(r, 8, 9) ==
        pb::test::frame(
            concat({head, index_leader, epoch, replicas_isr, offline, topic_ops, cluster_ops})));
}

TEST_CASE(
    "Metadata v8 request: the two include_*_authorized_operations flags after auto-creation") {
  pb::MetadataRequest req;
  req.topics = std::vector<std::string>{"t"};
  req.include_topic_authorized_operations = true;
  CHECK(pb::encode_request(req, 8, 1, std::nullopt) ==
        pb::test::frame(bytes({0, 3, 0, 8, 0, 0, 0,   1, 0xFF, 0xFF,  // header
                               0, 0, 0, 1, 0, 1, 't',                 // topics ["t"]
                               1, 0, 1})));  // auto-create, cluster ops, topic ops
  CHECK_THROWS_AS(pb::encode_request(req, 7, 1, std::nullopt), std::invalid_argument);
}
