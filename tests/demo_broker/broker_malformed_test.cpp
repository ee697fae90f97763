// Hostile input against the running broker: a battery of malformed frames, each on its own
// connection. Every one must end with a log line and that connection closed (or an error code,
// where Kafka answers one), while the broker keeps serving everyone else and loses nothing it
// had appended. Under ASan this also proves no bad read or huge allocation happens on the way.
#include "server/broker.hpp"

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "broker_test_util.hpp"
#include "demo/client.hpp"
#include "protocol/record_batch.hpp"
#include "server/broker_runner.hpp"

namespace pb = purgatory::broker;
using pb::test::values;

namespace {

constexpr auto kCloseWithin = std::chrono::seconds(10);

// Built through the codec's Writer: g++ 12 -O3 misreports an inlined vector insert of 4 bytes
// (-Warray-bounds).
pb::Bytes be32(std::uint32_t v) {
  pb::Writer w;
  w.write_uint32(v);
  return std::move(w).take();
}

// A frame: size prefix + request header v1 (client_id "evil") + `body`.
pb::Bytes request(std::int16_t api_key, std::int16_t version, const pb::Bytes& body) {
  pb::Writer w = pb::begin_frame();
  w.write_int16(api_key);
  w.write_int16(version);
  w.write_int32(42);
  w.write_nullable_string(std::string("evil"));
  w.write_raw(body);
  return pb::finish_frame(std::move(w));
}

pb::Bytes with_prefix(std::uint32_t size, const pb::Bytes& payload) {
  pb::Writer w;
  w.write_uint32(size);
  w.write_raw(payload);
  return std::move(w).take();
}

struct Case {
  std::string name;
  pb::Bytes bytes;
};

std::vector<Case> battery(std::int32_t max_request_bytes) {
  std::vector<Case> out;
  out.push_back({"negative size prefix", with_prefix(0xFFFFFFFF, pb::Bytes(16, 0))});
  out.push_back({"size prefix 0", with_prefix(0, {})});
  out.push_back({"size prefix 3, below the smallest header", with_prefix(3, {0, 18, 0})});
  out.push_back({"size prefix above --max-request-bytes, no body sent",
                 be32(static_cast<std::uint32_t>(max_request_bytes) + 1)});
  out.push_back({"size prefix 2 GiB - 1", be32(0x7FFFFFFF)});
  out.push_back({"header truncated inside client_id",
                 with_prefix(12, {0, 3, 0, 1, 0, 0, 0, 7, 0, 100, 'a', 'b'})});
  out.push_back({"unknown api key 999", request(999, 0, {})});
  out.push_back({"unsupported Fetch version 11", request(1, 11, pb::Bytes(40, 0))});
  out.push_back({"unsupported Produce version 0", request(0, 0, pb::Bytes(20, 0))});
  // Metadata v1 body: topics count 1, then a topic string claiming 5000 bytes.
  out.push_back({"string longer than its frame", request(3, 1, {0, 0, 0, 1, 0x13, 0x88, 'a'})});
  out.push_back({"negative array count (-2 topics)", request(3, 1, {0xFF, 0xFF, 0xFF, 0xFE})});
  // Produce v3: transactional_id null, acks 1, timeout 1000, topics count -7.
  out.push_back({"negative array count in Produce",
                 request(0, 3, {0xFF, 0xFF, 0, 1, 0, 0, 3, 0xE8, 0xFF, 0xFF, 0xFF, 0xF9})});
  out.push_back({"array count 1000000 in a 12-byte body",
                 request(0, 3, {0xFF, 0xFF, 0, 1, 0, 0, 3, 0xE8, 0x00, 0x0F, 0x42, 0x40})});
  out.push_back({"trailing bytes after ApiVersions v0", request(18, 0, {1, 2, 3})});
  out.push_back({"Fetch v4 body cut short", request(1, 4, {0xFF, 0xFF, 0xFF, 0xFF, 0, 0})});
  // JoinGroup v4: group "g", session 6000, rebalance 6000, member "", type "c", one protocol
  // "r" whose metadata is null (-1), which Kafka's schema does not allow.
  out.push_back({"JoinGroup v4 with null protocol metadata",
                 request(11, 4, {0, 1,   'g', 0, 0, 0x17, 0x70, 0, 0,   0x17, 0x70, 0,    0,   0,
                                 1, 'c', 0,   0, 0, 1,    0,    1, 'r', 0xFF, 0xFF, 0xFF, 0xFF})});
  out.push_back({"OffsetCommit v2 with 1000000 topics in 4 bytes",
                 request(8, 2, {0, 1, 'g', 0, 0, 0, 1, 0,    1,    'm',  0,
                                0, 0, 0,   0, 0, 0, 0, 0x00, 0x0F, 0x42, 0x40})});
  std::mt19937 rng(20240611);  // fixed seed: the same garbage every run
  pb::Bytes garbage(60);
  for (auto& b : garbage)
    b = static_cast<std::uint8_t>(rng());
  out.push_back({"a whole frame of 60 random bytes", with_prefix(60, garbage)});
  return out;
}

}  // namespace

TEST_CASE("Malformed-frame battery: each bad connection is closed, others keep working") {
  pb::test::LogCapture log;
  pb::BrokerConfig config = pb::test::test_config(log);
  config.max_request_bytes = 64 * 1024;
  pb::BrokerRunner broker(config);

  pb::Client good("good-client");
  good.connect("127.0.0.1", broker.port());
  REQUIRE(good.produce_one("safe", 0, values({"one", "two"}), 1).error_code == pb::Errc::none);

  const std::vector<Case> cases = battery(config.max_request_bytes);
  for (const Case& c : cases) {
    CAPTURE(c.name);
    pb::Client evil("evil");
    evil.connect("127.0.0.1", broker.port());
    evil.write(c.bytes);
    CHECK(evil.closed_by_peer_within(kCloseWithin));
    // The good connection, open all along, is still served.
    CHECK(good.api_versions(2).error_code == pb::Errc::none);
  }
  for (const std::string& line : log.lines()) {
    if (line.find("closing") != std::string::npos) MESSAGE(line);  // shown with -s
  }
  CHECK(broker.metrics().malformed_requests >= cases.size() - 1);
  CHECK(log.contains("malformed frame"));
  CHECK(log.contains("malformed Metadata v1 request"));

  {
    // A client that announces 100 bytes, sends 10 and leaves.
    pb::Client evil("evil");
    evil.connect("127.0.0.1", broker.port());
    evil.write(with_prefix(100, pb::Bytes(10, 0)));
    evil.close();
  }

  // Nothing appended before the battery was lost, and a brand-new client works.
  pb::Client fresh("fresh-client");
  fresh.connect("127.0.0.1", broker.port());
  const auto p = fresh.fetch_one("safe", 0, 0, 0, 1);
  REQUIRE(p.records.has_value());
  const auto recs = pb::parse_record_batches(*p.records);
  REQUIRE(recs.size() == 2);
  CHECK(recs[1].value == "two");
  CHECK(fresh.produce_one("safe", 0, values({"three"}), 1).base_offset == 2);
}

TEST_CASE("Errors Kafka answers rather than closing: ApiVersions v9 and a corrupt batch") {
  pb::test::LogCapture log;
  pb::BrokerRunner broker(pb::test::test_config(log));
  pb::Client c;
  c.connect("127.0.0.1", broker.port());
  // ApiVersions v9: header v2 (flexible) with an empty tagged-field section.
  pb::Writer w = pb::begin_frame();
  pb::write_request_header(w, {pb::ApiKey::api_versions, 9, 5, std::string("x")});
  w.write_empty_tagged_fields();
  c.write(pb::finish_frame(std::move(w)));
  CHECK(pb::decode_response<pb::ApiVersionsResponse>(c.receive_frame(), 0).body.error_code ==
        pb::Errc::unsupported_version);
  // A batch with magic 1: CORRUPT_MESSAGE, connection kept.
  pb::Bytes batch = pb::build_record_batch(values({"x"}), 1);
  batch[pb::batch_layout::kMagic] = 1;
  pb::ProduceRequest req;
  req.acks = 1;
  req.topics = {{"m", {{0, batch}}}};
  CHECK(c.produce(req).responses.at(0).partitions.at(0).error_code == pb::Errc::corrupt_message);
  req.topics = {{"m", {{0, std::nullopt}}}};
  CHECK(c.produce(req).responses.at(0).partitions.at(0).error_code == pb::Errc::invalid_record);
  CHECK(c.api_versions(1).error_code == pb::Errc::none);
}

TEST_CASE("A frame over --max-request-bytes=1024 is refused from its size prefix alone") {
  pb::test::LogCapture log;
  pb::BrokerConfig config = pb::test::test_config(log);
  config.max_request_bytes = 1024;
  pb::BrokerRunner broker(config);
  pb::Client c;
  c.connect("127.0.0.1", broker.port());
  c.write(be32(1025));  // the body never comes: only the prefix can have caused the close
  CHECK(c.closed_by_peer_within(kCloseWithin));
  CHECK(log.contains("exceeds the maximum of 1024 bytes"));
  // A frame of exactly the limit is fine.
  pb::Client ok;
  ok.connect("127.0.0.1", broker.port());
  CHECK(ok.api_versions(0).error_code == pb::Errc::none);
}
