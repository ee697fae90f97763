// What the broker says it speaks is what it answers: every api and version in its ApiVersions
// table gets a response in that version's layout; raw, hand-built frames for Metadata v5-v8 (what
// clients pinned to Kafka 1.0-2.x send) and for ApiVersions, including a version from the future
// answered per KIP-511.
#include "protocol/api_versions.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "broker_test_util.hpp"
#include "demo/client.hpp"
#include "protocol/records.hpp"
#include "server/broker_runner.hpp"
#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::bytes_of;
using pb::test::concat;

namespace {

// Two partitions, and groups that form without the initial rebalance delay.
struct TwoPartitions : pb::test::BrokerWithClient {
  TwoPartitions()
      : BrokerWithClient([](pb::BrokerConfig& c) {
          c.partitions = 2;
          c.groups.initial_rebalance_delay = std::chrono::milliseconds(0);
        }) {}
};

// Sends `req` at `version` and decodes the answer at `version` (its layout, strictly: no byte
// left over), returning true; a ClientError or DecodeError fails the calling test.
template <class Resp, class Req>
bool answered(pb::Client& c, const Req& req, std::int16_t version) {
  c.send(req, version);
  (void)c.receive<Resp>(version, std::chrono::seconds(20));
  return true;
}

// One request of `key` that the broker answers at once, at `version`.
bool send_one(pb::Client& c, pb::ApiKey key, std::int16_t v) {
  const std::string topic = "versions";
  switch (key) {
    case pb::ApiKey::produce: {
      pb::ProduceRequest req;
      req.acks = 1;
      req.topics = {{topic, {{0, pb::build_record_batch(pb::test::values({"x"}), 1)}}}};
      return answered<pb::ProduceResponse>(c, req, v);
    }
    case pb::ApiKey::fetch: {
      pb::FetchRequest req;
      req.max_wait_ms = 0;
      req.topics = {{topic, {{0, 0, 1 << 20}}}};
      return answered<pb::FetchResponse>(c, req, v);
    }
    case pb::ApiKey::list_offsets: {
      pb::ListOffsetsRequest req;
      req.topics = {{topic, {{0, pb::kLatestTimestamp}}}};
      return answered<pb::ListOffsetsResponse>(c, req, v);
    }
    case pb::ApiKey::metadata:
      return answered<pb::MetadataResponse>(c, pb::MetadataRequest{}, v);
    case pb::ApiKey::offset_commit: {
      pb::OffsetCommitRequest req;
      req.group_id = "versions-simple";
      req.topics = {{topic, {{0, 1, -1, -1, std::nullopt}}}};
      return answered<pb::OffsetCommitResponse>(c, req, v);
    }
    case pb::ApiKey::offset_fetch: {
      pb::OffsetFetchRequest req;
      req.group_id = "versions-simple";
      req.topics = std::vector<pb::OffsetFetchTopic>{{topic, {0}}};
      return answered<pb::OffsetFetchResponse>(c, req, v);
    }
    case pb::ApiKey::find_coordinator:
      return answered<pb::FindCoordinatorResponse>(
          c, pb::FindCoordinatorRequest{"g", pb::kCoordinatorKeyGroup}, v);
    case pb::ApiKey::join_group: {
      pb::JoinGroupRequest req;
      req.group_id = "versions-join-" + std::to_string(v);  // an empty group each: no rebalance
      req.session_timeout_ms = 10000;
      req.rebalance_timeout_ms = 10000;
      req.protocol_type = "consumer";
      req.protocols = {{"range", {}}};
      return answered<pb::JoinGroupResponse>(c, req, v);
    }
    case pb::ApiKey::heartbeat:
      return answered<pb::HeartbeatResponse>(c, pb::HeartbeatRequest{"g", 1, "nobody"}, v);
    case pb::ApiKey::leave_group:
      return answered<pb::LeaveGroupResponse>(c, pb::LeaveGroupRequest{"g", "nobody"}, v);
    case pb::ApiKey::sync_group: {
      pb::SyncGroupRequest req;
      req.group_id = "g";
      req.member_id = "nobody";
      return answered<pb::SyncGroupResponse>(c, req, v);
    }
    case pb::ApiKey::describe_groups:
      return answered<pb::DescribeGroupsResponse>(c, pb::DescribeGroupsRequest{{"g"}}, v);
    case pb::ApiKey::list_groups:
      return answered<pb::ListGroupsResponse>(c, pb::ListGroupsRequest{}, v);
    case pb::ApiKey::api_versions:
      return answered<pb::ApiVersionsResponse>(c, pb::ApiVersionsRequest{"test", "1"}, v);
    case pb::ApiKey::init_producer_id:
      return answered<pb::InitProducerIdResponse>(c, pb::InitProducerIdRequest{}, v);
  }
  return false;
}

// The payload of the next response frame, and its correlation id checked.
pb::Bytes reply(pb::Client& c, std::int32_t correlation_id) {
  pb::Bytes payload = c.receive_frame();
  REQUIRE(payload.size() >= 4);
  CHECK(pb::Reader(payload).read_int32("correlation_id") == correlation_id);
  return payload;
}

}  // namespace

TEST_CASE("every api and version the broker advertises is answered in that version's layout") {
  TwoPartitions f;
  int answered_versions = 0;
  for (const pb::ApiVersion& api : pb::broker_api_versions()) {
    for (std::int16_t v = api.min_version; v <= api.max_version; ++v) {
      CAPTURE(pb::api_key_name(api.api_key));
      CAPTURE(v);
      CHECK(send_one(f.client, api.api_key, v));
      ++answered_versions;
    }
  }
  // ApiVersions 4, Metadata 9, Produce 2, Fetch 1, ListOffsets 1, InitProducerId 6, OffsetCommit
  // 7, OffsetFetch 6, FindCoordinator 3, JoinGroup 5, Heartbeat 3, LeaveGroup 2, SyncGroup 3,
  // DescribeGroups 3, ListGroups 3: 58 versions in all.
  CHECK(answered_versions == 58);
  CHECK_FALSE(f.log.contains("malformed"));
}

TEST_CASE("raw Metadata v5..v8 requests are answered in their layouts, the topic auto-created") {
  TwoPartitions f;
  for (std::int16_t v = 5; v <= 8; ++v) {
    CAPTURE(v);
    const std::string topic = "pinned-v" + std::to_string(v);
    pb::Bytes payload = concat({bytes({0, 3, 0, static_cast<std::uint8_t>(v), 0, 0, 0, 40 + v}),
                                bytes({0, 2}), bytes_of("go"),               // client id "go"
                                bytes({0, 0, 0, 1, 0, 9}), bytes_of(topic),  // topics [topic]
                                bytes({1})});                                // auto-create
    if (v >= 8) payload.insert(payload.end(), {1, 1});  // include cluster and topic operations
    f.client.write(pb::test::frame(payload));
    const pb::Bytes resp = reply(f.client, 40 + v);
    const auto m = pb::decode_response<pb::MetadataResponse>(resp, v).body;
    REQUIRE(m.brokers.size() == 1);
    CHECK(m.brokers[0].port == f.broker.port());
    REQUIRE(m.topics.size() == 1);
    CHECK(m.topics[0].name == topic);
    CHECK(m.topics[0].error_code == pb::Errc::none);
    REQUIRE(m.topics[0].partitions.size() == 2);
    const pb::MetadataPartition& p = m.topics[0].partitions[1];
    CHECK(p.partition_index == 1);
    CHECK(p.replica_nodes == std::vector<std::int32_t>{1});
    CHECK(p.offline_replicas.empty());
    CHECK(p.leader_epoch == -1);
    if (v >= 8) {
      // Every topic and cluster operation, as Kafka without an authorizer answers.
      CHECK(m.topics[0].topic_authorized_operations == 0x0DF8);
      CHECK(m.cluster_authorized_operations == 0x1FA0);
    }
    // v5 adds 4 bytes per partition (an empty offline_replicas), v7 4 more (leader_epoch), v8 4
    // per topic and 4 at the end.
    const std::size_t v4_size =
        pb::test::payload_of(pb::encode_response(
                                 [&] {
                                   pb::MetadataResponse at4 = m;
                                   at4.cluster_authorized_operations =
                                       pb::kAuthorizedOperationsNotRequested;
                                   return at4;
                                 }(),
                                 4, 40 + v))
            .size();
    const std::size_t extra = 2 * 4 + (v >= 7 ? 2 * 4 : 0) + (v >= 8 ? 8 : 0);
    CHECK(resp.size() == v4_size + extra);
  }
}

TEST_CASE("a raw ApiVersions v3 request: the table says ApiVersions 0..3 and Metadata 0..8") {
  TwoPartitions f;
  f.client.write(pb::test::frame(concat({bytes({0, 18, 0, 3, 0, 0, 0, 5}),  // header v2
                                         bytes({0, 2}), bytes_of("go"), bytes({0}), bytes({3}),
                                         bytes_of("go"),             // software name
                                         bytes({2}), bytes_of("1"),  // software version
                                         bytes({0})})));
  const auto r = pb::decode_response<pb::ApiVersionsResponse>(reply(f.client, 5), 3).body;
  CHECK(r.error_code == pb::Errc::none);
  const auto range_of = [&](pb::ApiKey key) {
    const auto it = std::find_if(r.api_keys.begin(), r.api_keys.end(),
                                 [key](const pb::ApiVersion& a) { return a.api_key == key; });
    REQUIRE(it != r.api_keys.end());
    return std::pair<int, int>{it->min_version, it->max_version};
  };
  CHECK(range_of(pb::ApiKey::api_versions) == std::pair{0, 3});
  CHECK(range_of(pb::ApiKey::metadata) == std::pair{0, 8});
  CHECK(range_of(pb::ApiKey::init_producer_id) == std::pair{0, 5});
}

TEST_CASE("KIP-511: a raw ApiVersions v7 request gets UNSUPPORTED_VERSION in the v0 layout") {
  TwoPartitions f;
  // Header v2 and a body this broker cannot know; the answer is a v0 body: error_code, then the
  // table as an int32-counted array, nothing after it.
  f.client.write(pb::test::frame(concat({bytes({0, 18, 0, 7, 0, 0, 0, 6}), bytes({0, 2}),
                                         bytes_of("go"), bytes({0}), bytes({9, 9, 9, 0})})));
  const pb::Bytes payload = reply(f.client, 6);
  CHECK(payload[4] == 0);
  CHECK(payload[5] == 35);  // UNSUPPORTED_VERSION
  const auto r = pb::decode_response<pb::ApiVersionsResponse>(payload, 0).body;
  CHECK(r.error_code == pb::Errc::unsupported_version);
  CHECK(r.api_keys == pb::broker_api_versions());  // the supported range, ApiVersions 0..3 in it
  CHECK(payload.size() == 4 + 2 + 4 + 6 * r.api_keys.size());
  // The client retries at v3 on the same connection.
  CHECK(f.client.api_versions(3).error_code == pb::Errc::none);
}
