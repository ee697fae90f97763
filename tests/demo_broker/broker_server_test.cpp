// The demo broker end to end, in-process on a free loopback port, through the codec-based
// Client: error codes, ordering, the fetch and produce purgatories, and disconnects. Real time is
// used only where the purgatory's timing is the point, with generous upper bounds.
#include "server/broker.hpp"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "broker_test_util.hpp"
#include "demo/client.hpp"
#include "protocol/record_batch.hpp"
#include "server/broker_runner.hpp"

namespace pb = purgatory::broker;
using pb::test::values;
using pb::test::wait_until;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::vector<pb::ConsumerRecord> records_of(const pb::FetchPartitionResponse& p) {
  return p.records ? pb::parse_record_batches(*p.records) : std::vector<pb::ConsumerRecord>{};
}

using Fixture = pb::test::BrokerWithClient;

}  // namespace

TEST_CASE("Produce acks=1 then Fetch from 0 returns the 3 records at offsets 0..2") {
  Fixture f;
  const auto r = f.client.produce_one("orders", 0, values({"a", "b", "c"}), 1);
  CHECK(r.error_code == pb::Errc::none);
  CHECK(r.base_offset == 0);
  const auto p = f.client.fetch_one("orders", 0, 0, 100, 1);
  CHECK(p.error_code == pb::Errc::none);
  CHECK(p.high_watermark == 3);
  CHECK(p.last_stable_offset == 3);
  REQUIRE(p.aborted_transactions.has_value());  // empty, not null
  const auto recs = records_of(p);
  REQUIRE(recs.size() == 3);
  CHECK(recs[2].offset == 2);
  CHECK(recs[2].value == "c");
  CHECK(f.client.produce_one("orders", 0, values({"d"}), 1).base_offset == 3);
}

TEST_CASE("Metadata lists this broker at 127.0.0.1 and its real port, leader of every partition") {
  Fixture f([](pb::BrokerConfig& c) {
    c.partitions = 3;
    c.node_id = 7;
  });
  const pb::MetadataResponse m = f.client.metadata(std::vector<std::string>{"created", "bad/name"});
  REQUIRE(m.brokers.size() == 1);
  CHECK(m.brokers[0].host == "127.0.0.1");
  CHECK(m.brokers[0].port == f.broker.port());
  CHECK(m.brokers[0].node_id == 7);
  CHECK(m.controller_id == 7);
  REQUIRE(m.topics.size() == 2);
  CHECK(m.topics[0].error_code == pb::Errc::none);
  REQUIRE(m.topics[0].partitions.size() == 3);
  CHECK(m.topics[0].partitions[2].leader_id == 7);
  CHECK(m.topics[1].error_code == pb::Errc::invalid_topic_exception);
  CHECK(f.client.metadata(std::nullopt).topics.size() == 1);  // all topics: the created one
}

TEST_CASE("ApiVersions v3 is answered in v3, v4 gets UNSUPPORTED_VERSION (35) in a v0 body") {
  Fixture f;
  const pb::ApiVersionsResponse v3 = f.client.api_versions(3);
  CHECK(v3.error_code == pb::Errc::none);
  CHECK(v3.api_keys == pb::broker_api_versions());
  // A version from the future: header v2 (flexible), empty body; the answer is v0.
  pb::Writer w = pb::begin_frame();
  pb::write_request_header(w, {pb::ApiKey::api_versions, 4, 99, std::string("future")});
  w.write_empty_tagged_fields();
  f.client.write(pb::finish_frame(std::move(w)));
  const auto resp = pb::decode_response<pb::ApiVersionsResponse>(f.client.receive_frame(), 0);
  CHECK(resp.correlation_id == 99);
  CHECK(resp.body.error_code == pb::Errc::unsupported_version);
  CHECK_FALSE(resp.body.api_keys.empty());
  CHECK(f.client.api_versions(0).error_code == pb::Errc::none);  // the connection stayed open
}

TEST_CASE("Fetch and ListOffsets on an unknown topic answer 3 and do not create it") {
  Fixture f;
  CHECK(f.client.fetch_one("nope", 0, 0, 1000, 1).error_code ==
        pb::Errc::unknown_topic_or_partition);
  pb::ListOffsetsRequest req;
  req.topics = {{"nope", {{0, pb::kEarliestTimestamp}}}};
  CHECK(f.client.list_offsets(req).topics.at(0).partitions.at(0).error_code ==
        pb::Errc::unknown_topic_or_partition);
  CHECK(f.client.metadata(std::nullopt).topics.empty());
}

TEST_CASE("Fetch at offset 5 of a 2-record log answers OFFSET_OUT_OF_RANGE (1) at once") {
  Fixture f;
  f.client.produce_one("t", 0, values({"a", "b"}), 1);
  const auto start = Clock::now();
  CHECK(f.client.fetch_one("t", 0, 5, 5000, 1).error_code == pb::Errc::offset_out_of_range);
  CHECK(ms_since(start) < 2500);  // an error is answered without waiting max_wait_ms
  CHECK(f.client.fetch_one("t", 0, 2, 0, 1).error_code == pb::Errc::none);  // log end: in range
}

TEST_CASE("Produce to partition 3 of a 3-partition topic answers 3, partition 2 works") {
  Fixture f([](pb::BrokerConfig& c) { c.partitions = 3; });
  CHECK(f.client.produce_one("p", 3, values({"x"}), 1).error_code ==
        pb::Errc::unknown_topic_or_partition);
  CHECK(f.client.produce_one("p", 2, values({"x"}), 1).error_code == pb::Errc::none);
  CHECK(records_of(f.client.fetch_one("p", 2, 0, 0, 1)).size() == 1);
}

TEST_CASE("Produce acks=2 answers INVALID_REQUIRED_ACKS (21) and appends nothing") {
  Fixture f;
  CHECK(f.client.produce_one("acks", 0, values({"x"}), 2).error_code ==
        pb::Errc::invalid_required_acks);
  CHECK(f.client.metadata(std::nullopt).topics.empty());
}

TEST_CASE("A batch with a bad CRC gets CORRUPT_MESSAGE (2) and the records before it stay") {
  Fixture f;
  f.client.produce_one("crc", 0, values({"kept"}), 1);
  pb::Bytes bad = pb::build_record_batch(values({"bad"}), 1);
  bad.back() ^= 0xFF;  // a record byte: the CRC no longer matches
  pb::ProduceRequest req;
  req.acks = 1;
  req.topics = {{"crc", {{0, bad}}}};
  CHECK(f.client.produce(req).responses.at(0).partitions.at(0).error_code ==
        pb::Errc::corrupt_message);
  const auto recs = records_of(f.client.fetch_one("crc", 0, 0, 0, 1));
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].value == "kept");
}

TEST_CASE("Produce acks=0 gets no response: the next request's answer comes first") {
  Fixture f;
  pb::ProduceRequest req;
  req.acks = 0;
  req.topics = {{"fire", {{0, pb::build_record_batch(values({"and forget"}), 1)}}}};
  f.client.send(req, pb::kProduceVersion, /*expect_response=*/false);
  CHECK(f.client.metadata(std::vector<std::string>{"fire"}).topics.size() == 1);
  CHECK(records_of(f.client.fetch_one("fire", 0, 0, 0, 1)).size() == 1);
}

TEST_CASE("ListOffsets: -2 is the log start (0), -1 the high watermark (4)") {
  Fixture f;
  f.client.produce_one("lo", 0, values({"a", "b", "c", "d"}), 1);
  pb::ListOffsetsRequest req;
  req.topics = {{"lo", {{0, pb::kEarliestTimestamp}, {0, pb::kLatestTimestamp}}}};
  const auto resp = f.client.list_offsets(req);
  CHECK(resp.topics.at(0).partitions.at(0).offset == 0);
  CHECK(resp.topics.at(0).partitions.at(1).offset == 4);
}

TEST_CASE("A Fetch with nothing to read waits max_wait_ms=300 and answers empty") {
  Fixture f;
  f.client.metadata(std::vector<std::string>{"empty"});
  const auto start = Clock::now();
  const auto p = f.client.fetch_one("empty", 0, 0, 300, 1);
  const double waited = ms_since(start);
  CHECK(p.error_code == pb::Errc::none);
  CHECK(records_of(p).empty());
  CHECK(waited >= 299);  // the timer never fires early
  CHECK(waited < 5000);
  const auto m = f.broker.metrics();
  CHECK(m.fetch.expired_total == 1);
  CHECK(f.log.contains("expired after max_wait_ms=300"));
}

TEST_CASE(
    "A parked Fetch (min_bytes=1, max_wait_ms=10000) completes when another client produces") {
  Fixture f;
  f.client.metadata(std::vector<std::string>{"wake"});
  pb::FetchRequest fetch;
  fetch.max_wait_ms = 10000;
  fetch.topics = {{"wake", {{0, 0, 1 << 20}}}};
  const auto start = Clock::now();
  f.client.send(fetch, pb::kFetchVersion);
  REQUIRE(wait_until([&] { return f.broker.metrics().fetch.delayed == 1; }));
  pb::Client producer;
  producer.connect("127.0.0.1", f.broker.port());
  producer.produce_one("wake", 0, values({"hello"}), 1);
  const auto resp = f.client.receive<pb::FetchResponse>(pb::kFetchVersion);
  CHECK(ms_since(start) < 8000);
  const auto recs = records_of(resp.body.responses.at(0).partitions.at(0));
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].value == "hello");
  CHECK(f.broker.metrics().fetch.completed_total >= 1);
}

TEST_CASE("Responses go out in request order: a parked Fetch holds back a later Metadata") {
  Fixture f;
  f.client.metadata(std::vector<std::string>{"order"});
  pb::FetchRequest fetch;
  fetch.max_wait_ms = 400;
  fetch.topics = {{"order", {{0, 0, 1 << 20}}}};
  const auto start = Clock::now();
  f.client.send(fetch, pb::kFetchVersion);
  f.client.send(pb::MetadataRequest{}, pb::kMetadataVersion);
  // receive() checks correlation ids: the Fetch must come back first.
  f.client.receive<pb::FetchResponse>(pb::kFetchVersion);
  f.client.receive<pb::MetadataResponse>(pb::kMetadataVersion);
  CHECK(ms_since(start) >= 399);
}

TEST_CASE("acks=-1 completes when both followers (20 ms, 60 ms) have replicated") {
  Fixture f([](pb::BrokerConfig& c) {
    c.replication_delays = {milliseconds(20), milliseconds(60)};
  });
  const auto start = Clock::now();
  const auto r = f.client.produce_one("all", 0, values({"x"}), -1, 10000);
  const double waited = ms_since(start);
  CHECK(r.error_code == pb::Errc::none);
  CHECK(r.base_offset == 0);
  CHECK(waited >= 59);
  CHECK(waited < 8000);
  CHECK(f.broker.metrics().produce.completed_total == 1);
}

TEST_CASE("acks=-1 with timeout_ms=100 and a 1500 ms follower: REQUEST_TIMED_OUT (7), data kept") {
  Fixture f([](pb::BrokerConfig& c) {
    c.replication_delays = {milliseconds(1), milliseconds(1500)};
  });
  const auto r = f.client.produce_one("late", 0, values({"x"}), -1, 100);
  CHECK(r.error_code == pb::Errc::request_timed_out);
  CHECK(f.broker.metrics().produce.expired_total == 1);
  // Once the slow follower catches up the record becomes readable: it never left the log.
  const auto p = f.client.fetch_one("late", 0, 0, 10000, 1);
  CHECK(records_of(p).size() == 1);
}

TEST_CASE(
    "A client that disconnects while its Fetch is parked: completed, freed, nothing written") {
  Fixture f;
  f.client.metadata(std::vector<std::string>{"gone"});
  pb::FetchRequest fetch;
  fetch.max_wait_ms = 60000;
  fetch.topics = {{"gone", {{0, 0, 1 << 20}}}};
  f.client.send(fetch, pb::kFetchVersion);
  REQUIRE(wait_until([&] { return f.broker.metrics().fetch.delayed == 1; }));
  f.client.close();
  REQUIRE(wait_until([&] { return f.broker.metrics().connections_open == 0; }));
  const auto m = f.broker.metrics();
  CHECK(m.fetch.delayed == 0);
  CHECK(m.fetch.watched == 0);
  CHECK(m.abandoned_operations == 1);
  CHECK(f.log.contains("abandoned: the client disconnected; nothing written"));
}

TEST_CASE("A client that disconnects while its acks=-1 Produce waits: the data stays") {
  Fixture f([](pb::BrokerConfig& c) { c.replication_delays = {milliseconds(300)}; });
  pb::ProduceRequest req;
  req.acks = -1;
  req.timeout_ms = 60000;
  req.topics = {{"left", {{0, pb::build_record_batch(values({"x"}), 1)}}}};
  f.client.send(req, pb::kProduceVersion);
  REQUIRE(wait_until([&] { return f.broker.metrics().produce.delayed == 1; }));
  f.client.close();
  REQUIRE(wait_until([&] { return f.broker.metrics().connections_open == 0; }));
  CHECK(f.broker.metrics().produce.delayed == 0);
  pb::Client other;
  other.connect("127.0.0.1", f.broker.port());
  CHECK(records_of(other.fetch_one("left", 0, 0, 10000, 1)).size() == 1);
}

TEST_CASE("Stopping the broker with parked operations completes them and closes every client") {
  auto f = std::make_unique<Fixture>();
  f->client.metadata(std::vector<std::string>{"stop"});
  pb::FetchRequest fetch;
  fetch.max_wait_ms = 60000;
  fetch.topics = {{"stop", {{0, 0, 1 << 20}}}};
  f->client.send(fetch, pb::kFetchVersion);
  REQUIRE(wait_until([&] { return f->broker.metrics().fetch.delayed == 1; }));
  const auto start = Clock::now();
  f->broker.stop();
  CHECK(ms_since(start) < 5000);
  CHECK(f->client.closed_by_peer_within(std::chrono::seconds(5)));
}

TEST_CASE("200 requests pipelined behind a parked Fetch all come back, in order") {
  // More than max_in_flight_per_connection (8 here): the broker pauses reading, TCP pushes back,
  // and nothing is lost or reordered.
  Fixture f([](pb::BrokerConfig& c) { c.max_in_flight_per_connection = 8; });
  f.client.metadata(std::vector<std::string>{"pipe"});
  pb::FetchRequest fetch;
  fetch.max_wait_ms = 200;
  fetch.topics = {{"pipe", {{0, 0, 1 << 20}}}};
  f.client.send(fetch, pb::kFetchVersion);
  for (int i = 0; i < 200; ++i)
    f.client.send(pb::ApiVersionsRequest{}, 2);
  f.client.receive<pb::FetchResponse>(pb::kFetchVersion);
  for (int i = 0; i < 200; ++i) {
    CHECK(f.client.receive<pb::ApiVersionsResponse>(2).body.error_code == pb::Errc::none);
  }
}

TEST_CASE(
    "fetch_max_bytes=100000 caps a Fetch asking for 10 MiB at the 2 of 4 40 KB batches that fit, "
    "and a 150 KB first batch is still returned whole (KIP-74)") {
  constexpr std::int32_t kCap = 100000;
  constexpr std::int32_t kAsked = 10 << 20;
  Fixture f([](pb::BrokerConfig& c) { c.fetch_max_bytes = kCap; });
  const std::vector<pb::ProducerRecord> batch{{std::nullopt, std::string(40000, 'b')}};
  for (int i = 0; i < 4; ++i)
    REQUIRE(f.client.produce_one("capped", 0, batch, 1).error_code == pb::Errc::none);
  const auto p = f.client.fetch_one("capped", 0, 0, 0, 1, kAsked);
  CHECK(p.error_code == pb::Errc::none);
  CHECK(p.high_watermark == 4);
  REQUIRE(p.records.has_value());
  CHECK(p.records->size() <= static_cast<std::size_t>(kCap));
  const auto recs = records_of(p);
  REQUIRE(recs.size() == 2);  // a third batch would pass 100000 bytes
  CHECK(recs[1].offset == 1);

  const std::vector<pb::ProducerRecord> big{{std::nullopt, std::string(150000, 'B')}};
  REQUIRE(f.client.produce_one("capped", 0, big, 1).base_offset == 4);
  const auto first = records_of(f.client.fetch_one("capped", 0, 4, 0, 1, kAsked));
  REQUIRE(first.size() == 1);
  CHECK(first[0].offset == 4);
  CHECK(first[0].value == std::string(150000, 'B'));
  CHECK(f.log.contains("record bytes (min_bytes=1)"));  // the request log line, once built
}

TEST_CASE("a Broker refuses fetch_max_bytes = 0 with std::invalid_argument naming the value") {
  pb::test::LogCapture log;
  pb::BrokerConfig c = pb::test::test_config(log);
  c.fetch_max_bytes = 0;
  CHECK_THROWS_WITH_AS(pb::BrokerRunner{c}, doctest::Contains("fetch_max_bytes = 0"),
                       std::invalid_argument);
}

namespace {

// Sends a Fetch that parks (on an empty topic, max_wait_ms=1000) and behind it a Fetch of "busy"
// from offset 0 that completes at once, and waits until the broker has handled both: the second's
// response is then ready but held back behind the first.
void send_fetch_held_behind_a_parked_one(Fixture& f) {
  f.client.metadata(std::vector<std::string>{"idle"});
  pb::FetchRequest parked;
  parked.max_wait_ms = 1000;
  parked.topics = {{"idle", {{0, 0, 1 << 20}}}};
  pb::FetchRequest ready;
  ready.max_wait_ms = 1000;
  ready.topics = {{"busy", {{0, 0, 1 << 20}}}};
  const std::uint64_t before = f.broker.metrics().requests;
  f.client.send(parked, pb::kFetchVersion);
  f.client.send(ready, pb::kFetchVersion);
  // One io thread: once both are counted, anything another client sends is handled after them.
  REQUIRE(wait_until([&] {
    const auto m = f.broker.metrics();
    return m.requests == before + 2 && m.fetch.delayed == 1;
  }));
}

}  // namespace

TEST_CASE(
    "A Fetch that completes behind a parked Fetch is built when its turn comes: it serves the 2 "
    "records there are then, not the 1 there was when it completed") {
  Fixture f;
  REQUIRE(f.client.produce_one("busy", 0, values({"first"}), 1).error_code == pb::Errc::none);
  send_fetch_held_behind_a_parked_one(f);
  pb::Client producer;
  producer.connect("127.0.0.1", f.broker.port());
  REQUIRE(producer.produce_one("busy", 0, values({"second"}), 1).error_code == pb::Errc::none);
  const auto parked = f.client.receive<pb::FetchResponse>(pb::kFetchVersion);  // on expiry
  CHECK(records_of(parked.body.responses.at(0).partitions.at(0)).empty());
  const auto held = f.client.receive<pb::FetchResponse>(pb::kFetchVersion);
  const auto recs = records_of(held.body.responses.at(0).partitions.at(0));
  REQUIRE(recs.size() == 2);
  CHECK(recs[0].value == "first");
  CHECK(recs[1].value == "second");
}

TEST_CASE(
    "A Fetch held behind a parked Fetch whose offset retention (1000 bytes) removes meanwhile "
    "answers OFFSET_OUT_OF_RANGE (1), as Kafka would then") {
  Fixture f([](pb::BrokerConfig& c) { c.retention_bytes = 1000; });
  const std::vector<pb::ProducerRecord> batch{{std::nullopt, std::string(600, 'r')}};
  REQUIRE(f.client.produce_one("busy", 0, batch, 1).error_code == pb::Errc::none);
  send_fetch_held_behind_a_parked_one(f);
  pb::Client producer;
  producer.connect("127.0.0.1", f.broker.port());
  REQUIRE(producer.produce_one("busy", 0, batch, 1).base_offset == 1);  // drops offset 0
  f.client.receive<pb::FetchResponse>(pb::kFetchVersion);
  const auto held = f.client.receive<pb::FetchResponse>(pb::kFetchVersion);
  const auto& p = held.body.responses.at(0).partitions.at(0);
  CHECK(p.error_code == pb::Errc::offset_out_of_range);
  CHECK(p.high_watermark == 2);
}
