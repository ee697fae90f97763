#include "protocol/api_versions.hpp"

#include <algorithm>

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::bytes_of;
using pb::test::concat;

TEST_CASE(
    "the broker advertises ApiVersions 0..3, Metadata 0..8, Produce 3..4, Fetch 4, ListOffsets 1, "
    "InitProducerId 0..5 and the group apis from v0 (librdkafka's balanced-consumer feature "
    "needs v0 of each)") {
  const std::vector<pb::ApiVersion> table = pb::broker_api_versions();
  const auto find = [&](pb::ApiKey key) {
    const auto it = std::find_if(table.begin(), table.end(),
                                 [key](const pb::ApiVersion& v) { return v.api_key == key; });
    REQUIRE(it != table.end());
    return std::pair<int, int>{it->min_version, it->max_version};
  };
  CHECK(table.size() == 15);
  CHECK(find(pb::ApiKey::api_versions) == std::pair{0, 3});
  CHECK(find(pb::ApiKey::metadata) == std::pair{0, 8});
  CHECK(find(pb::ApiKey::init_producer_id) == std::pair{0, 5});
  CHECK(find(pb::ApiKey::produce) == std::pair{3, 4});
  CHECK(find(pb::ApiKey::fetch) == std::pair{4, 4});
  CHECK(find(pb::ApiKey::list_offsets) == std::pair{1, 1});
  // kafka-python 2.0.2 (api_version 0.11) sends FindCoordinator v0, JoinGroup v2, SyncGroup,
  // Heartbeat and LeaveGroup v1, OffsetCommit v2, OffsetFetch v1; librdkafka 2.0.2 picks the
  // highest of each below, none of which is flexible or carries a static member id.
  CHECK(find(pb::ApiKey::find_coordinator) == std::pair{0, 2});
  CHECK(find(pb::ApiKey::join_group) == std::pair{0, 4});
  CHECK(find(pb::ApiKey::sync_group) == std::pair{0, 2});
  CHECK(find(pb::ApiKey::heartbeat) == std::pair{0, 2});
  CHECK(find(pb::ApiKey::leave_group) == std::pair{0, 1});
  CHECK(find(pb::ApiKey::offset_commit) == std::pair{0, 6});
  CHECK(find(pb::ApiKey::offset_fetch) == std::pair{0, 5});
  CHECK(find(pb::ApiKey::list_groups) == std::pair{0, 2});
  CHECK(find(pb::ApiKey::describe_groups) == std::pair{0, 2});
  // Exactly what can be decoded is advertised: no version offered that would then be refused.
  for (const pb::ApiVersion& v : table) {
    const auto range = pb::codec_versions(v.api_key);
    REQUIRE(range.has_value());
    CHECK(*range == pb::VersionRange{v.min_version, v.max_version});
  }
}

TEST_CASE("ApiVersions request round-trips at v0..v3") {
  for (std::int16_t v = 0; v <= 3; ++v) {
    CAPTURE(v);
    pb::ApiVersionsRequest req;
    if (v >= 3) req = {"librdkafka", "2.0.2"};
    CHECK(pb::test::request_round_trip(req, v) == req);
  }
}

TEST_CASE("ApiVersions response round-trips at v0..v3") {
  for (std::int16_t v = 0; v <= 3; ++v) {
    CAPTURE(v);
    pb::ApiVersionsResponse resp;
    resp.error_code = pb::Errc::unsupported_version;
    resp.api_keys = pb::broker_api_versions();
    if (v >= 1) resp.throttle_time_ms = 250;
    CHECK(pb::test::response_round_trip(resp, v) == resp);
  }
}

TEST_CASE("ApiVersions v3 request matches the bytes librdkafka sends") {
  const pb::Bytes expected = concat({
      bytes({0, 0, 0, 36}),                 // size
      bytes({0, 18, 0, 3, 0, 0, 0, 1}),     // api_key 18, version 3, correlation_id 1
      bytes({0, 7}), bytes_of("rdkafka"),   // client_id (int16 length even in header v2)
      bytes({0}),                           // header tagged fields
      bytes({11}), bytes_of("librdkafka"),  // client_software_name, compact (10 + 1)
      bytes({6}), bytes_of("2.0.2"),        // client_software_version, compact (5 + 1)
      bytes({0}),                           // body tagged fields
  });
  CHECK(pb::encode_request(pb::ApiVersionsRequest{"librdkafka", "2.0.2"}, 3, 1,
                           std::string("rdkafka")) == expected);
}

TEST_CASE("ApiVersions responses match Kafka's layouts byte for byte") {
  pb::ApiVersionsResponse resp;
  resp.api_keys = {{pb::ApiKey::api_versions, 0, 2}};
  // v0: header v0, error_code, int32 array of (key, min, max).
  CHECK(pb::encode_response(resp, 0, 1) ==
        bytes({0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 18, 0, 0, 0, 2}));
  // v1: throttle_time_ms appended.
  CHECK(pb::encode_response(resp, 1, 1) ==
        bytes({0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 18, 0, 0, 0, 2, 0, 0, 0, 0}));
  // v3: still header v0; compact array (count + 1), tagged fields per entry and at the end.
  CHECK(pb::encode_response(resp, 3, 1) ==
        bytes({0, 0, 0, 19, 0, 0, 0, 1, 0, 0, 2, 0, 18, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0}));
}

TEST_CASE("an ApiVersions v3 response with tagged fields from a real broker decodes") {
  // As Kafka 3.x sends it: one entry with an empty tag section, throttle 0, then tag 0
  // (SupportedFeatures) with a 1-byte payload (empty compact array) in the top-level section.
  const pb::Bytes payload =
      bytes({0, 0, 0, 9, 0, 0, 2, 0, 3, 0, 0, 0, 12, 0, 0, 0, 0, 0, 1, 0, 1, 1});
  const auto r = pb::decode_response<pb::ApiVersionsResponse>(payload, 3);
  CHECK(r.correlation_id == 9);
  CHECK(r.body.error_code == pb::Errc::none);
  REQUIRE(r.body.api_keys.size() == 1);
  CHECK(r.body.api_keys[0] == pb::ApiVersion{pb::ApiKey::metadata, 0, 12});
}
