// The consumer-group apis of the codec: every version round-trips with every field it has,
// requests match Kafka's layouts byte for byte, and what a version cannot say is refused.
#include "protocol/join_group.hpp"

#include <stdexcept>

#include <doctest/doctest.h>

#include "protocol/consumer_protocol.hpp"
#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::bytes_of;
using pb::test::concat;
using pb::test::decode_error_kind;
using pb::test::request_round_trip;
using pb::test::response_round_trip;
using Kind = pb::DecodeErrorKind;

namespace {

// A request frame: size, header v1 (key, version, correlation id 1, client_id "c"), `body`.
pb::Bytes request_frame(int key, int version, const pb::Bytes& body) {
  return pb::test::frame(concat({bytes({0, key, 0, version, 0, 0, 0, 1, 0, 1, 'c'}), body}));
}

}  // namespace

TEST_CASE("FindCoordinator round-trips at v0..v2, v1+ carry key_type and error_message") {
  for (std::int16_t v = 0; v <= 2; ++v) {
    CAPTURE(v);
    pb::FindCoordinatorRequest req{"orders-group", pb::kCoordinatorKeyGroup};
    CHECK(request_round_trip(req, v) == req);
    pb::FindCoordinatorResponse resp;
    resp.node_id = 1;
    resp.host = "127.0.0.1";
    resp.port = 9092;
    if (v >= 1) {
      resp.throttle_time_ms = 3;
      resp.error_message = "none";
    }
    CHECK(response_round_trip(resp, v) == resp);
  }
  CHECK_THROWS_AS(
      pb::encode_request(pb::FindCoordinatorRequest{"tx", pb::kCoordinatorKeyTransaction}, 0, 1,
                         std::nullopt),
      std::invalid_argument);
  // kafka-python's GroupCoordinatorRequest v0: the group id only.
  CHECK(pb::encode_request(pb::FindCoordinatorRequest{"g1"}, 0, 1, std::string("c")) ==
        request_frame(10, 0, bytes({0, 2, 'g', '1'})));
  // v0 response: error_code, node_id, host, port.
  pb::FindCoordinatorResponse v0{0, pb::Errc::none, std::nullopt, 7, "h", 9092};
  CHECK(pb::encode_response(v0, 0, 5) ==
        bytes({0, 0, 0, 17, 0, 0, 0, 5, 0, 0, 0, 0, 0, 7, 0, 1, 'h', 0, 0, 0x23, 0x84}));
}

TEST_CASE("JoinGroup round-trips at v0..v4, v0 has no rebalance timeout, v2+ a throttle time") {
  for (std::int16_t v = 0; v <= 4; ++v) {
    CAPTURE(v);
    pb::JoinGroupRequest req;
    req.group_id = "g1";
    req.session_timeout_ms = 10000;
    if (v >= 1) req.rebalance_timeout_ms = 300000;
    req.member_id = "rdkafka-1234";
    req.protocol_type = "consumer";
    req.protocols = {{"range", bytes({0, 0, 0, 0, 0, 1})}, {"roundrobin", {}}};
    CHECK(request_round_trip(req, v) == req);

    // Aggregate-initialized: g++ 12 misreports assigning short literals here (-Wrestrict).
    pb::JoinGroupResponse resp{v >= 2 ? 1 : 0,
                               pb::Errc::none,
                               3,
                               "range",
                               "leader-1",
                               "member-2",
                               {{"leader-1", bytes({1})}, {"member-2", bytes({2, 3})}}};
    CHECK(response_round_trip(resp, v) == resp);
  }
}

TEST_CASE("JoinGroup v4 matches the layout librdkafka sends, and refuses null metadata") {
  const pb::Bytes body = concat({
      bytes({0, 2, 'g', '1'}),              // group_id
      bytes({0, 0, 0xAF, 0xC8}),            // session_timeout_ms 45000
      bytes({0, 4, 0x93, 0xE0}),            // rebalance_timeout_ms 300000
      bytes({0, 0}),                        // member_id ""
      bytes({0, 8}), bytes_of("consumer"),  // protocol_type
      bytes({0, 0, 0, 1}),                  // protocols: 1
      bytes({0, 5}), bytes_of("range"),     // name
      bytes({0, 0, 0, 3, 1, 2, 3}),         // metadata
  });
  pb::JoinGroupRequest req{"g1", 45000, 300000, "", "consumer", {{"range", bytes({1, 2, 3})}}};
  CHECK(pb::encode_request(req, 4, 1, std::string("c")) == request_frame(11, 4, body));

  pb::Bytes null_metadata = body;
  null_metadata.resize(null_metadata.size() - 7);
  const pb::Bytes with_null = concat({null_metadata, bytes({0xFF, 0xFF, 0xFF, 0xFF})});
  CHECK(decode_error_kind([&] {
          pb::decode_request(pb::test::payload_of(request_frame(11, 4, with_null)));
        }) == Kind::negative_length);
}

TEST_CASE("SyncGroup round-trips at v0..v2") {
  for (std::int16_t v = 0; v <= 2; ++v) {
    CAPTURE(v);
    pb::SyncGroupRequest req{"g1", 4, "leader-1", {{"leader-1", bytes({0, 0})}, {"m-2", {}}}};
    CHECK(request_round_trip(req, v) == req);
    pb::SyncGroupResponse resp;
    if (v >= 1) resp.throttle_time_ms = 9;
    resp.error_code = pb::Errc::rebalance_in_progress;
    resp.assignment = bytes({0, 0, 0, 0, 0, 0});
    CHECK(response_round_trip(resp, v) == resp);
  }
}

TEST_CASE("Heartbeat (v0..v2) and LeaveGroup (v0..v1) round-trip, v1 adds the throttle time") {
  for (std::int16_t v = 0; v <= 2; ++v) {
    CAPTURE(v);
    pb::HeartbeatRequest req{"g1", 7, "m-1"};
    CHECK(request_round_trip(req, v) == req);
    pb::HeartbeatResponse resp{v >= 1 ? 4 : 0, pb::Errc::illegal_generation};
    CHECK(response_round_trip(resp, v) == resp);
  }
  for (std::int16_t v = 0; v <= 1; ++v) {
    CAPTURE(v);
    pb::LeaveGroupRequest req{"g1", "m-1"};
    CHECK(request_round_trip(req, v) == req);
    pb::LeaveGroupResponse resp{v >= 1 ? 4 : 0, pb::Errc::unknown_member_id};
    CHECK(response_round_trip(resp, v) == resp);
  }
  // kafka-python's HeartbeatRequest v1: group, generation, member.
  CHECK(pb::encode_request(pb::HeartbeatRequest{"g1", 3, "m"}, 1, 1, std::string("c")) ==
        request_frame(12, 1, bytes({0, 2, 'g', '1', 0, 0, 0, 3, 0, 1, 'm'})));
  // Heartbeat v1 response: throttle_time_ms, error_code 27.
  CHECK(pb::encode_response(pb::HeartbeatResponse{0, pb::Errc::rebalance_in_progress}, 1, 2) ==
        bytes({0, 0, 0, 10, 0, 0, 0, 2, 0, 0, 0, 0, 0, 27}));
}

TEST_CASE("OffsetCommit round-trips at v0..v6 with the fields each version has") {
  for (std::int16_t v = 0; v <= 6; ++v) {
    CAPTURE(v);
    pb::OffsetCommitRequest req;
    req.group_id = "g1";
    if (v >= 1) {
      req.generation_id = 5;
      req.member_id = "m-1";
    }
    if (v >= 2 && v <= 4) req.retention_time_ms = 86400000;
    pb::OffsetCommitPartition p0{0, 42, -1, -1, std::string("meta")};
    pb::OffsetCommitPartition p1{3, 7, -1, -1, std::nullopt};
    if (v >= 6) p0.committed_leader_epoch = 2;
    if (v == 1) p1.commit_timestamp = 1700000000000;
    req.topics = {{"orders", {p0, p1}}, {"payments", {}}};
    CHECK(request_round_trip(req, v) == req);

    pb::OffsetCommitResponse resp;
    if (v >= 3) resp.throttle_time_ms = 2;
    resp.topics = {{"orders", {{0, pb::Errc::none}, {3, pb::Errc::unknown_member_id}}}};
    CHECK(response_round_trip(resp, v) == resp);
  }
}

TEST_CASE("OffsetCommit v2 matches Kafka's layout: generation, member, retention, no timestamp") {
  pb::OffsetCommitRequest req{"g", 3, "m", -1, {{"t", {{0, 42, -1, -1, std::string("")}}}}};
  const pb::Bytes body = concat({
      bytes({0, 1, 'g'}),                                       // group_id
      bytes({0, 0, 0, 3}),                                      // generation_id
      bytes({0, 1, 'm'}),                                       // member_id
      bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}),  // retention_time_ms -1
      bytes({0, 0, 0, 1, 0, 1, 't'}),                           // topics: 1, "t"
      bytes({0, 0, 0, 1, 0, 0, 0, 0}),                          // partitions: 1, index 0
      bytes({0, 0, 0, 0, 0, 0, 0, 42}),                         // committed_offset
      bytes({0, 0}),                                            // committed_metadata ""
  });
  CHECK(pb::encode_request(req, 2, 1, std::string("c")) == request_frame(8, 2, body));
}

TEST_CASE("OffsetFetch round-trips at v0..v5, only v2+ can ask for every partition (null)") {
  for (std::int16_t v = 0; v <= 5; ++v) {
    CAPTURE(v);
    pb::OffsetFetchRequest req{"g1", std::vector<pb::OffsetFetchTopic>{{"orders", {0, 1, 2}}}};
    CHECK(request_round_trip(req, v) == req);
    const pb::OffsetFetchRequest all{"g1", std::nullopt};
    if (v >= 2) {
      CHECK(request_round_trip(all, v) == all);
    } else {
      CHECK_THROWS_AS(pb::encode_request(all, v, 1, std::nullopt), std::invalid_argument);
    }

    pb::OffsetFetchResponse resp;
    if (v >= 3) resp.throttle_time_ms = 6;
    pb::OffsetFetchPartitionResponse committed{0, 42, -1, std::string("m"), pb::Errc::none};
    if (v >= 5) committed.committed_leader_epoch = 3;
    resp.topics = {{"orders", {committed, {1, -1, -1, std::string(""), pb::Errc::none}}}};
    if (v >= 2) resp.error_code = pb::Errc::invalid_group_id;
    CHECK(response_round_trip(resp, v) == resp);
  }
  // v2: the null topics array is int32 -1.
  CHECK(pb::encode_request(pb::OffsetFetchRequest{"g", std::nullopt}, 2, 1, std::string("c")) ==
        request_frame(9, 2, bytes({0, 1, 'g', 0xFF, 0xFF, 0xFF, 0xFF})));
  // v1 reads -1 as a negative count, not as "all".
  CHECK(decode_error_kind([] {
          pb::decode_request(pb::test::payload_of(
              request_frame(9, 1, bytes({0, 1, 'g', 0xFF, 0xFF, 0xFF, 0xFF}))));
        }) == Kind::negative_length);
}

TEST_CASE("ListGroups and DescribeGroups round-trip at v0..v2") {
  for (std::int16_t v = 0; v <= 2; ++v) {
    CAPTURE(v);
    CHECK(request_round_trip(pb::ListGroupsRequest{}, v) == pb::ListGroupsRequest{});
    pb::ListGroupsResponse listed;
    if (v >= 1) listed.throttle_time_ms = 1;
    listed.groups = {{"g1", "consumer"}, {"offsets-only", ""}};
    CHECK(response_round_trip(listed, v) == listed);

    pb::DescribeGroupsRequest req{{"g1", "nobody"}};
    CHECK(request_round_trip(req, v) == req);
    pb::DescribeGroupsResponse resp;
    if (v >= 1) resp.throttle_time_ms = 1;
    pb::DescribedGroup g{pb::Errc::none, "g1", "Stable", "consumer", "range", {}};
    g.members = {{"m-1", "rdkafka", "/127.0.0.1", bytes({0, 0}), bytes({0, 0, 1})}};
    resp.groups = {g, {pb::Errc::none, "nobody", "Dead", "", "", {}}};
    CHECK(response_round_trip(resp, v) == resp);
  }
  // ListGroups v0: an empty body.
  CHECK(pb::encode_request(pb::ListGroupsRequest{}, 0, 1, std::string("c")) ==
        request_frame(16, 0, {}));
}

TEST_CASE("a truncated or overcounted group request is a DecodeError, not an allocation") {
  // Heartbeat v1 cut inside the member id.
  CHECK(decode_error_kind([] {
          pb::decode_request(pb::test::payload_of(
              request_frame(12, 1, bytes({0, 2, 'g', '1', 0, 0, 0, 3, 0, 9, 'm'}))));
        }) == Kind::truncated);
  // SyncGroup v1 claiming 100000 assignments in 4 bytes.
  CHECK(decode_error_kind([] {
          pb::decode_request(pb::test::payload_of(
              request_frame(14, 1, bytes({0, 1, 'g', 0, 0, 0, 1, 0, 1, 'm', 0, 1, 0x86, 0xA0}))));
        }) == Kind::bad_count);
  // DescribeGroups v0 with trailing bytes.
  CHECK(decode_error_kind([] {
          pb::decode_request(pb::test::payload_of(request_frame(15, 0, bytes({0, 0, 0, 0, 9}))));
        }) == Kind::trailing_bytes);
}

TEST_CASE("consumer protocol: a subscription and an assignment round-trip at version 0") {
  const pb::ConsumerSubscription sub{0, {"orders", "payments"}, std::nullopt};
  const pb::Bytes sub_bytes = pb::encode_subscription(sub);
  CHECK(sub_bytes == concat({bytes({0, 0, 0, 0, 0, 2, 0, 6}), bytes_of("orders"), bytes({0, 8}),
                             bytes_of("payments"), bytes({0xFF, 0xFF, 0xFF, 0xFF})}));
  CHECK(pb::decode_subscription(sub_bytes) == sub);

  const pb::ConsumerAssignment a{0, {{"orders", {0, 2}}, {"payments", {1}}}, std::nullopt};
  CHECK(pb::decode_assignment(pb::encode_assignment(a)) == a);
  CHECK(pb::describe_assignment(a) == "orders-0,orders-2,payments-1");
  CHECK(pb::describe_assignment(pb::ConsumerAssignment{}) == "(none)");
}

TEST_CASE("consumer protocol: a v1 subscription with owned partitions decodes its v0 fields") {
  // librdkafka and the Java client send v1+: user_data, then owned_partitions.
  const pb::Bytes v1 = concat({bytes({0, 1, 0, 0, 0, 1, 0, 1, 't'}), bytes({0, 0, 0, 1, 9}),
                               bytes({0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 3})});
  const pb::ConsumerSubscription s = pb::decode_subscription(v1);
  CHECK(s.version == 1);
  CHECK(s.topics == std::vector<std::string>{"t"});
  CHECK(s.user_data == bytes({9}));
  CHECK(decode_error_kind([] {
          (void)pb::decode_assignment(bytes({0, 0, 0, 0, 0, 5}));
        }) == Kind::bad_count);
}

TEST_CASE("range assignor: per topic, members sorted by id take ranges, the first ones one more") {
  const auto member = [](std::string id, std::vector<std::string> topics) {
    return pb::JoinGroupMember{std::move(id), pb::encode_subscription({0, std::move(topics), {}})};
  };
  // "c" joined first but sorts last; "b" reads both topics; "x" is not a consumer.
  const std::vector<pb::JoinGroupMember> members{
      member("c", {"orders"}), member("a", {"orders"}), member("b", {"orders", "audit"}),
      pb::JoinGroupMember{"x", bytes_of("not a subscription")}};
  const auto partitions = [](const std::string& topic) { return topic == "orders" ? 5 : 2; };
  const std::vector<pb::SyncGroupAssignment> out = pb::range_assign(members, partitions);
  REQUIRE(out.size() == 4);
  const auto of = [&](std::size_t i) { return pb::decode_assignment(out[i].assignment).topics; };
  CHECK(out[0].member_id == "c");
  CHECK(of(0) == std::vector<pb::AssignedTopic>{{"orders", {4}}});
  CHECK(of(1) == std::vector<pb::AssignedTopic>{{"orders", {0, 1}}});
  // Topics in name order: audit (b alone, both partitions), then orders.
  CHECK(of(2) == std::vector<pb::AssignedTopic>{{"audit", {0, 1}}, {"orders", {2, 3}}});
  CHECK(of(3).empty());
  // A topic with fewer partitions than members: the last members get nothing of it.
  const auto one = [](const std::string&) { return 1; };
  const auto single = pb::range_assign({member("b", {"t"}), member("a", {"t"})}, one);
  CHECK(pb::decode_assignment(single[1].assignment).topics ==
        std::vector<pb::AssignedTopic>{{"t", {0}}});
  CHECK(pb::decode_assignment(single[0].assignment).topics.empty());
}
