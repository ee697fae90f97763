#include "protocol/fetch.hpp"

#include <doctest/doctest.h>

#include "protocol/records.hpp"
#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::concat;

TEST_CASE("Fetch v4 request round-trips") {
  pb::FetchRequest req;
  req.replica_id = -1;
  req.max_wait_ms = 500;
  req.min_bytes = 1;
  req.max_bytes = 52428800;
  req.isolation_level = 1;
  req.topics = {{"orders", {{0, 0, 1048576}, {1, 12345678901LL, 65536}}}, {"empty", {}}};
  CHECK(pb::test::request_round_trip(req, 4) == req);
}

TEST_CASE("Fetch v4 request bytes follow FetchRequest.json") {
  pb::FetchRequest req;
  req.replica_id = -1;
  req.max_wait_ms = 100;
  req.min_bytes = 1;
  req.max_bytes = 1000;
  req.isolation_level = 0;
  req.topics = {{"t", {{0, 5, 200}}}};
  CHECK(pb::encode_request(req, 4, 1, std::nullopt) ==
        pb::test::frame(concat({bytes({0, 1, 0, 4, 0, 0, 0, 1, 0xFF, 0xFF}),    // header
                                bytes({0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 100}),  // replica, wait
                                bytes({0, 0, 0, 1, 0, 0, 0x03, 0xE8, 0}),     // min, max, isolation
                                bytes({0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1}),   // topics [t [
                                bytes({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}),  // partition 0 @ 5
                                bytes({0, 0, 0, 200})})));                    // partition_max
}

TEST_CASE("Fetch v4 response round-trips: records, null records, aborted transactions") {
  const std::vector<pb::ProducerRecord> recs = {{std::nullopt, std::string("hello")}};
  pb::FetchResponse resp;
  resp.throttle_time_ms = 0;
  resp.responses = {{"orders",
                     {{0, pb::Errc::none, 10, 10, std::nullopt, pb::build_record_batch(recs, 1, 9)},
                      {1, pb::Errc::offset_out_of_range, 3, 3,
                       std::vector<pb::AbortedTransaction>{}, std::nullopt},
                      {2, pb::Errc::none, 8, 4,
                       std::vector<pb::AbortedTransaction>{{77, 4}, {78, 6}}, pb::Bytes{}}}}};
  CHECK(pb::test::response_round_trip(resp, 4) == resp);
}

TEST_CASE("Fetch v4 response bytes follow FetchResponse.json") {
  pb::FetchResponse resp;
  resp.throttle_time_ms = 2;
  resp.responses = {{"t", {{0, pb::Errc::none, 9, 9, std::nullopt, pb::test::bytes({0xEE})}}}};
  CHECK(pb::encode_response(resp, 4, 1) ==
        pb::test::frame(concat({bytes({0, 0, 0, 1, 0, 0, 0, 2}),  // correlation_id, throttle
                                bytes({0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1}),  // responses [t [
                                bytes({0, 0, 0, 0, 0, 0}),        // partition_index 0, error_code 0
                                bytes({0, 0, 0, 0, 0, 0, 0, 9}),  // high_watermark
                                bytes({0, 0, 0, 0, 0, 0, 0, 9}),  // last_stable_offset
                                bytes({0xFF, 0xFF, 0xFF, 0xFF}),  // aborted: null
                                bytes({0, 0, 0, 1, 0xEE})})));    // records
}
