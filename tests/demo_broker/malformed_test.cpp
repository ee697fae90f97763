// Hostile input: every malformed request must end in a DecodeError of the right kind, never a
// crash, an out-of-bounds read (run under ASan) or a huge allocation.
#include "protocol/codec.hpp"

#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "protocol/records.hpp"
#include "test_util.hpp"

namespace pb = purgatory::broker;
using pb::test::bytes;
using pb::test::decode_error_kind;
using Kind = pb::DecodeErrorKind;

namespace {

struct Sample {
  std::string name;
  pb::Bytes payload;
  std::function<void(const pb::Bytes&)> decode;
};

// One fully populated request per api and version: every field present, so every prefix cuts
// through something.
std::vector<Sample> sample_requests() {
  std::vector<Sample> out;
  const auto add = [&out](std::string name, const pb::Bytes& frame) {
    out.push_back({std::move(name), pb::test::payload_of(frame),
                   [](const pb::Bytes& p) { pb::decode_request(p); }});
  };
  const std::optional<std::string> client = std::string("kcat");
  for (std::int16_t v = 0; v <= 3; ++v) {
    add("ApiVersions v" + std::to_string(v),
        pb::encode_request(pb::ApiVersionsRequest{"librdkafka", "2.0.2"}, v, 1, client));
  }
  for (std::int16_t v = 0; v <= 8; ++v) {
    pb::MetadataRequest req;
    req.topics = std::vector<std::string>{"orders", "payments"};
    req.include_topic_authorized_operations = v >= 8;
    add("Metadata v" + std::to_string(v), pb::encode_request(req, v, 2, client));
  }
  for (std::int16_t v = 0; v <= 5; ++v) {
    pb::InitProducerIdRequest req;
    req.transactional_id = "txn";
    req.transaction_timeout_ms = 60000;
    if (v >= 3) req.producer_id = 7;
    add("InitProducerId v" + std::to_string(v), pb::encode_request(req, v, 6, client));
  }
  const std::vector<pb::ProducerRecord> recs = {{std::string("k"), std::string("value")}};
  pb::ProduceRequest produce;
  produce.transactional_id = "txn";
  produce.topics = {{"orders", {{0, pb::build_record_batch(recs, 1)}, {1, std::nullopt}}}};
  add("Produce v3", pb::encode_request(produce, 3, 3, client));
  add("Produce v4", pb::encode_request(produce, 4, 3, client));
  pb::FetchRequest fetch;
  fetch.topics = {{"orders", {{0, 10, 1024}, {1, 20, 2048}}}};
  add("Fetch v4", pb::encode_request(fetch, 4, 4, client));
  pb::ListOffsetsRequest list;
  list.topics = {{"orders", {{0, pb::kEarliestTimestamp}, {1, pb::kLatestTimestamp}}}};
  add("ListOffsets v1", pb::encode_request(list, 1, 5, client));
  return out;
}

template <class Resp>
void add_response(std::vector<Sample>& out, std::string name, const Resp& resp, std::int16_t v) {
  out.push_back({std::move(name), pb::test::payload_of(pb::encode_response(resp, v, 9)),
                 [v](const pb::Bytes& p) { pb::decode_response<Resp>(p, v); }});
}

std::vector<Sample> sample_responses() {
  std::vector<Sample> out;
  for (std::int16_t v = 0; v <= 3; ++v) {
    add_response(out, "ApiVersions v" + std::to_string(v),
                 pb::ApiVersionsResponse{pb::Errc::none, pb::broker_api_versions(), 0}, v);
  }
  pb::MetadataResponse md;
  md.brokers = {{1, "localhost", 9092, std::string("r")}};
  md.cluster_id = "c";
  pb::MetadataTopic orders;
  orders.name = "orders";
  pb::MetadataPartition partition;
  partition.leader_id = 1;
  partition.replica_nodes = {1};
  partition.isr_nodes = {1};
  partition.offline_replicas = {2};
  orders.partitions = {partition};
  md.topics = {orders};
  for (std::int16_t v = 0; v <= 8; ++v)
    add_response(out, "Metadata v" + std::to_string(v), md, v);
  for (std::int16_t v = 0; v <= 5; ++v) {
    add_response(out, "InitProducerId v" + std::to_string(v),
                 pb::InitProducerIdResponse{0, pb::Errc::none, 1000, 0}, v);
  }
  pb::ProduceResponse produce;
  produce.responses = {{"orders", {{0, pb::Errc::none, 5, -1}}}};
  add_response(out, "Produce v3", produce, 3);
  pb::FetchResponse fetch;
  fetch.responses = {{"orders",
                      {{0, pb::Errc::none, 1, 1, std::vector<pb::AbortedTransaction>{{1, 2}},
                        pb::test::bytes({1, 2, 3})}}}};
  add_response(out, "Fetch v4", fetch, 4);
  pb::ListOffsetsResponse list;
  list.topics = {{"orders", {{0, pb::Errc::none, -1, 7}}}};
  add_response(out, "ListOffsets v1", list, 1);
  return out;
}

}  // namespace

TEST_CASE("every strict prefix of every request is rejected as truncated or bad_count") {
  std::size_t prefixes = 0;
  for (const Sample& s : sample_requests()) {
    CAPTURE(s.name);
    s.decode(s.payload);  // the whole payload decodes
    for (std::size_t n = 0; n < s.payload.size(); ++n) {
      CAPTURE(n);
      // An exactly-sized heap copy: reading one byte past it is an ASan error.
      const pb::Bytes prefix(s.payload.begin(), s.payload.begin() + static_cast<std::ptrdiff_t>(n));
      const auto kind = decode_error_kind([&] { s.decode(prefix); });
      REQUIRE(kind.has_value());
      // A cut inside an array may leave fewer bytes than its count needs: bad_count.
      CHECK((*kind == Kind::truncated || *kind == Kind::bad_count));
      ++prefixes;
    }
  }
  CHECK(prefixes > 500);
}

TEST_CASE("every strict prefix of every response is rejected as truncated or bad_count") {
  for (const Sample& s : sample_responses()) {
    CAPTURE(s.name);
    s.decode(s.payload);
    for (std::size_t n = 0; n < s.payload.size(); ++n) {
      CAPTURE(n);
      const pb::Bytes prefix(s.payload.begin(), s.payload.begin() + static_cast<std::ptrdiff_t>(n));
      const auto kind = decode_error_kind([&] { s.decode(prefix); });
      REQUIRE(kind.has_value());
      CHECK((*kind == Kind::truncated || *kind == Kind::bad_count));
    }
  }
}

TEST_CASE("overwriting any byte with 0x00/0x7F/0x80/0xFF decodes or throws DecodeError only") {
  // Robustness sweep: whatever the damage, the outcome is a value or a DecodeError (anything
  // else, a crash or an ASan report fails the test). Counts both to show both happen.
  std::size_t decoded = 0;
  std::size_t rejected = 0;
  for (const std::vector<Sample>& set : {sample_requests(), sample_responses()}) {
    for (const Sample& s : set) {
      CAPTURE(s.name);
      for (std::size_t i = 0; i < s.payload.size(); ++i) {
        for (const std::uint8_t b : {0x00, 0x7F, 0x80, 0xFF}) {
          pb::Bytes damaged = s.payload;
          damaged[i] = b;
          try {
            s.decode(damaged);
            ++decoded;
          } catch (const pb::DecodeError&) {
            ++rejected;
          }
        }
      }
    }
  }
  CHECK(decoded > 0);
  CHECK(rejected > 0);
}

TEST_CASE("negative string lengths: client_id -2, topic name -1 (not nullable)") {
  // Metadata v1, client_id length -2.
  const pb::Bytes bad_client = bytes({0, 3, 0, 1, 0, 0, 0, 1, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF});
  CHECK(decode_error_kind([&] { pb::decode_request(bad_client); }) == Kind::negative_length);
  // Metadata v1, one topic whose name has length -1.
  const pb::Bytes null_topic = bytes({0, 3, 0, 1, 0, 0, 0, 1, 0xFF, 0xFF, 0, 0, 0, 1, 0xFF, 0xFF});
  CHECK(decode_error_kind([&] { pb::decode_request(null_topic); }) == Kind::negative_length);
  CHECK(pb::test::decode_error_message([&] { pb::decode_request(null_topic); }) ==
        "metadata.topics[]: length -1 is negative (at byte 16)");
  // Produce v3, records length -2.
  const pb::Bytes bad_records =
      bytes({0,    0,    0, 3, 0,    0,    0,    1,   0xFF, 0xFF,     // header
             0xFF, 0xFF, 0, 1, 0,    0,    0,    100,                 // txn, acks, timeout
             0,    0,    0, 1, 0,    1,    't',  0,   0,    0,    1,  // topics [t [
             0,    0,    0, 0, 0xFF, 0xFF, 0xFF, 0xFE});              // index, records
  CHECK(decode_error_kind([&] { pb::decode_request(bad_records); }) == Kind::negative_length);
}

TEST_CASE("a string longer than the frame is truncated, and nothing is allocated for it") {
  // Metadata v1, one topic whose name claims 1000 bytes; 3 are present.
  const pb::Bytes data =
      bytes({0, 3, 0, 1, 0, 0, 0, 1, 0xFF, 0xFF, 0, 0, 0, 1, 0x03, 0xE8, 'a', 'b', 'c'});
  CHECK(decode_error_kind([&] { pb::decode_request(data); }) == Kind::truncated);
  // Produce v3 records claiming 2 GiB - 1.
  const pb::Bytes big = bytes({0, 0, 0, 3,   0, 0,    0,    1,    0xFF, 0xFF, 0xFF, 0xFF, 0, 1,
                               0, 0, 0, 100, 0, 0,    0,    1,    0,    1,    't',  0,    0, 0,
                               1, 0, 0, 0,   0, 0x7F, 0xFF, 0xFF, 0xFF, 1,    2,    3});
  CHECK(decode_error_kind([&] { pb::decode_request(big); }) == Kind::truncated);
  // ApiVersions v3 compact client_software_name claiming 0x0FFFFFFE bytes.
  const pb::Bytes compact = bytes({0, 18, 0, 3, 0, 0, 0, 1, 0xFF, 0xFF, 0,  // header v2
                                   0xFF, 0xFF, 0xFF, 0x7F, 'a'});
  CHECK(decode_error_kind([&] { pb::decode_request(compact); }) == Kind::truncated);
}

TEST_CASE(
    "negative array counts are negative_length, -1 allowed only where the array is nullable") {
  // Metadata v1 topics = -2.
  const pb::Bytes md1 = bytes({0, 3, 0, 1, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE});
  CHECK(decode_error_kind([&] { pb::decode_request(md1); }) == Kind::negative_length);
  // Metadata v0 topics = -1: v0's array is not nullable.
  const pb::Bytes md0 = bytes({0, 3, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});
  CHECK(decode_error_kind([&] { pb::decode_request(md0); }) == Kind::negative_length);
  // Fetch v4 topics = -1.
  const pb::Bytes fetch =
      bytes({0, 1, 0, 4, 0, 0,    0,    1,    0xFF, 0xFF,        // header
             0, 0, 0, 0, 0, 0,    0,    0,    0,    0,    0, 0,  // replica, wait, min
             0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF});            // max, iso, topics
  CHECK(decode_error_kind([&] { pb::decode_request(fetch); }) == Kind::negative_length);
  // ApiVersions v3 response, compact api_keys = null (0).
  const pb::Bytes av = bytes({0, 0, 0, 1, 0, 0, 0});
  CHECK(decode_error_kind([&] { pb::decode_response<pb::ApiVersionsResponse>(av, 3); }) ==
        Kind::negative_length);
}

TEST_CASE("huge array counts are bad_count before any memory is reserved") {
  // Produce v3 with 2^31-1 topics in a 24-byte payload.
  const pb::Bytes produce = bytes({0, 0, 0, 3, 0, 0,   0,    1,    0xFF, 0xFF, 0xFF, 0xFF,
                                   0, 1, 0, 0, 0, 100, 0x7F, 0xFF, 0xFF, 0xFF, 0,    0});
  CHECK(decode_error_kind([&] { pb::decode_request(produce); }) == Kind::bad_count);
  // ListOffsets v1 with 1 topic of 2^31-1 partitions.
  const pb::Bytes list = bytes({0,    2, 0, 1, 0, 0, 0, 1,   0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                0xFF, 0, 0, 0, 1, 0, 1, 't', 0x7F, 0xFF, 0xFF, 0xFF});
  CHECK(decode_error_kind([&] { pb::decode_request(list); }) == Kind::bad_count);
  // Metadata v4 response (client side) with 100000 brokers in a few bytes.
  const pb::Bytes md = bytes({0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0x86, 0xA0, 0, 0});
  CHECK(decode_error_kind([&] { pb::decode_response<pb::MetadataResponse>(md, 4); }) ==
        Kind::bad_count);
  // ApiVersions v3 response with a compact count of 2^28.
  const pb::Bytes av = bytes({0, 0, 0, 1, 0, 0, 0x81, 0x80, 0x80, 0x80, 0x01});
  CHECK(decode_error_kind([&] { pb::decode_response<pb::ApiVersionsResponse>(av, 3); }) ==
        Kind::bad_count);
  // A header-v2 tag section claiming 2^20 tags.
  const pb::Bytes tags = bytes({0, 18, 0, 3, 0, 0, 0, 1, 0xFF, 0xFF, 0x80, 0x80, 0x40});
  CHECK(decode_error_kind([&] { pb::decode_request(tags); }) == Kind::bad_count);
}
