#include "protocol/list_offsets.hpp"

#include <doctest/doctest.h>

#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::concat;

TEST_CASE("ListOffsets v1 request round-trips with earliest (-2) and latest (-1)") {
  CHECK(pb::kEarliestTimestamp == -2);
  CHECK(pb::kLatestTimestamp == -1);
  pb::ListOffsetsRequest req;
  req.replica_id = -1;
  req.topics = {{"orders", {{0, pb::kEarliestTimestamp}, {1, pb::kLatestTimestamp}}},
                {"payments", {{0, 1700000000000}}}};
  CHECK(pb::test::request_round_trip(req, 1) == req);
}

TEST_CASE("ListOffsets v1 request bytes follow ListOffsetsRequest.json") {
  pb::ListOffsetsRequest req;
  req.topics = {{"t", {{3, pb::kLatestTimestamp}}}};
  CHECK(pb::encode_request(req, 1, 1, std::nullopt) ==
        pb::test::frame(concat({bytes({0, 2, 0, 1, 0, 0, 0, 1, 0xFF, 0xFF}),  // header
                                bytes({0xFF, 0xFF, 0xFF, 0xFF}),              // replica_id -1
                                bytes({0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1}),   // topics [t [
                                bytes({0, 0, 0, 3}),                          // partition 3
                                bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})})));
}

TEST_CASE("ListOffsets v1 response round-trips and follows ListOffsetsResponse.json") {
  pb::ListOffsetsResponse resp;
  resp.topics = {{"orders", {{0, pb::Errc::none, -1, 42}, {1, pb::Errc::none, -1, 0}}},
                 {"missing", {{0, pb::Errc::unknown_topic_or_partition, -1, -1}}}};
  CHECK(pb::test::response_round_trip(resp, 1) == resp);

  pb::ListOffsetsResponse one;
  one.topics = {{"t", {{0, pb::Errc::none, -1, 5}}}};
  CHECK(pb::encode_response(one, 1, 1) ==
        pb::test::frame(concat({bytes({0, 0, 0, 1}),                         // correlation_id
                                bytes({0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1}),  // topics [t [
                                bytes({0, 0, 0, 0, 0, 0}),  // partition_index 0, error_code 0
                                bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}),  // ts
                                bytes({0, 0, 0, 0, 0, 0, 0, 5})})));  // offset 5
}
