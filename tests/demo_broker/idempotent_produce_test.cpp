// Idempotent producers against the broker in-process, on a free loopback port: InitProducerId,
// a produce request replayed byte for byte, sequence gaps, stale epochs, unknown producer ids,
// transactions refused, and the produce-response fault a client retries through.
#include "server/broker.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "broker_test_util.hpp"
#include "demo/client.hpp"
#include "protocol/records.hpp"
#include "server/broker_runner.hpp"

namespace pb = purgatory::broker;
using pb::test::values;
using pb::test::wait_until;
using std::chrono::milliseconds;

namespace {

using Fixture = pb::test::BrokerWithClient;

// A Produce v3 frame of one batch of `vals` stamped with `producer`.
pb::Bytes produce_frame(const std::string& topic, std::initializer_list<const char*> vals,
                        const pb::BatchProducer& producer, std::int16_t acks,
                        std::int32_t correlation_id) {
  pb::ProduceRequest req;
  req.acks = acks;
  req.timeout_ms = 30000;
  req.topics = {{topic, {{0, pb::build_record_batch(values(vals), 1000, 0, producer)}}}};
  return pb::encode_request(req, pb::kProduceVersion, correlation_id, std::string("raw"));
}

pb::ProducePartitionResponse answer(pb::Client& c) {
  const auto resp =
      pb::decode_response<pb::ProduceResponse>(c.receive_frame(), pb::kProduceVersion).body;
  REQUIRE(resp.responses.size() == 1);
  REQUIRE(resp.responses[0].partitions.size() == 1);
  return resp.responses[0].partitions[0];
}

std::vector<std::string> values_in(pb::Client& c, const std::string& topic) {
  const pb::FetchPartitionResponse p = c.fetch_one(topic, 0, 0, 0, 1);
  std::vector<std::string> out;
  if (!p.records) return out;
  for (const pb::ConsumerRecord& r : pb::parse_record_batches(*p.records))
    out.push_back(r.value.value_or(""));
  return out;
}

pb::BatchProducer stamp(std::int64_t id, std::int16_t epoch, std::int32_t base_sequence) {
  return pb::BatchProducer{id, epoch, base_sequence, 0};
}

}  // namespace

TEST_CASE("InitProducerId gives each idempotent producer a new id at epoch 0, at v0..v5") {
  Fixture f;
  std::int64_t last = -1;
  for (std::int16_t v = 0; v <= 5; ++v) {
    CAPTURE(v);
    f.client.send(pb::InitProducerIdRequest{}, v);
    const auto r = f.client.receive<pb::InitProducerIdResponse>(v).body;
    CHECK(r.error_code == pb::Errc::none);
    CHECK(r.producer_epoch == 0);
    CHECK(r.producer_id > last);
    last = r.producer_id;
  }
  CHECK(f.broker.metrics().idempotence.producer_ids_issued == 6);
  CHECK(f.log.contains("InitProducerId v5"));
  CHECK(f.log.contains("issued producer id"));
}

TEST_CASE("a transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), the link stays") {
  Fixture f;
  pb::InitProducerIdRequest req;
  req.transactional_id = "orders-txn";
  f.client.send(req, 4);
  const auto r = f.client.receive<pb::InitProducerIdResponse>(4).body;
  CHECK(r.error_code == pb::Errc::transactional_id_authorization_failed);
  CHECK(r.producer_id == -1);
  CHECK(
      f.log.contains("transactional id 'orders-txn' refused, demo_broker does not speak "
                     "transactions"));
  // A produce naming a transactional id is refused the same way, and appends nothing.
  pb::ProduceRequest produce;
  produce.transactional_id = "orders-txn";
  produce.topics = {{"txn", {{0, pb::build_record_batch(values({"x"}), 1)}}}};
  CHECK(f.client.produce(produce).responses.at(0).partitions.at(0).error_code ==
        pb::Errc::transactional_id_authorization_failed);
  CHECK(values_in(f.client, "txn").empty());
  CHECK(f.broker.metrics().idempotence.transactional_refused == 2);
  CHECK(f.client.init_producer_id().error_code == pb::Errc::none);
}

TEST_CASE("a produce request replayed byte for byte: the original offset, appended once") {
  Fixture f;
  const std::int64_t id = f.client.init_producer_id().producer_id;
  REQUIRE(f.client.produce_one("replay", 0, values({"before"}), 1).base_offset == 0);
  const pb::Bytes frame = produce_frame("replay", {"a", "b", "c"}, stamp(id, 0, 0), 1, 500);
  f.client.write(frame);
  const pb::ProducePartitionResponse first = answer(f.client);
  CHECK(first.error_code == pb::Errc::none);
  CHECK(first.base_offset == 1);
  // The same bytes again, on a new connection, as a producer retrying after a lost response.
  pb::Client retry;
  retry.connect("127.0.0.1", f.broker.port());
  retry.write(frame);
  const pb::ProducePartitionResponse second = answer(retry);
  CHECK(second.error_code == pb::Errc::none);
  CHECK(second.base_offset == 1);
  CHECK(values_in(f.client, "replay") == std::vector<std::string>{"before", "a", "b", "c"});
  const pb::BrokerMetrics m = f.broker.metrics();
  CHECK(m.idempotence.duplicate_batches == 1);
  CHECK(m.idempotence.producer_states == 1);
  CHECK(f.log.contains("duplicate batch on replay-0"));
  // The producer's next batch follows on.
  CHECK(f.client.produce_one("replay", 0, values({"d"}), 1, 30000, stamp(id, 0, 3)).base_offset ==
        4);
}

TEST_CASE("an acks=-1 retry waits in the produce purgatory until its original is replicated") {
  Fixture f([](pb::BrokerConfig& c) { c.replication_delays = {milliseconds(400)}; });
  const std::int64_t id = f.client.init_producer_id().producer_id;
  const pb::Bytes frame = produce_frame("slow", {"x"}, stamp(id, 0, 0), -1, 9);
  f.client.write(frame);
  REQUIRE(wait_until([&] { return f.broker.metrics().produce.delayed == 1; }));
  pb::Client retry;
  retry.connect("127.0.0.1", f.broker.port());
  retry.write(frame);
  REQUIRE(wait_until([&] { return f.broker.metrics().produce.delayed == 2; }));
  CHECK(answer(f.client).base_offset == 0);
  const pb::ProducePartitionResponse again = answer(retry);
  CHECK(again.error_code == pb::Errc::none);
  CHECK(again.base_offset == 0);
  CHECK(f.broker.metrics().produce.completed_total == 2);
  CHECK(values_in(f.client, "slow").size() == 1);
}

TEST_CASE("a sequence gap gets OUT_OF_ORDER_SEQUENCE_NUMBER (45) and appends nothing") {
  Fixture f;
  const std::int64_t id = f.client.init_producer_id().producer_id;
  REQUIRE(
      f.client.produce_one("gap", 0, values({"0", "1"}), 1, 30000, stamp(id, 0, 0)).error_code ==
      pb::Errc::none);
  const auto r = f.client.produce_one("gap", 0, values({"5"}), 1, 30000, stamp(id, 0, 5));
  CHECK(r.error_code == pb::Errc::out_of_order_sequence_number);
  CHECK(r.base_offset == -1);
  CHECK(values_in(f.client, "gap") == std::vector<std::string>{"0", "1"});
  CHECK(f.broker.metrics().idempotence.out_of_order_batches == 1);
  CHECK(f.log.contains("OUT_OF_ORDER_SEQUENCE_NUMBER (producer " + std::to_string(id) +
                       " epoch 0: expected sequence 2, got 5..5)"));
}

TEST_CASE("a stale epoch gets INVALID_PRODUCER_EPOCH (47) and appends nothing") {
  Fixture f;
  const std::int64_t id = f.client.init_producer_id().producer_id;
  REQUIRE(f.client.produce_one("epoch", 0, values({"e0"}), 1, 30000, stamp(id, 0, 0)).error_code ==
          pb::Errc::none);
  REQUIRE(f.client.produce_one("epoch", 0, values({"e1"}), 1, 30000, stamp(id, 1, 0)).error_code ==
          pb::Errc::none);
  const auto r = f.client.produce_one("epoch", 0, values({"late"}), 1, 30000, stamp(id, 0, 1));
  CHECK(r.error_code == pb::Errc::invalid_producer_epoch);
  CHECK(values_in(f.client, "epoch") == std::vector<std::string>{"e0", "e1"});
  CHECK(f.broker.metrics().idempotence.stale_epoch_batches == 1);
}

TEST_CASE("a producer id this broker never issued gets UNKNOWN_PRODUCER_ID (59)") {
  Fixture f;
  const auto r = f.client.produce_one("unknown", 0, values({"x"}), 1, 30000, stamp(7, 0, 0));
  CHECK(r.error_code == pb::Errc::unknown_producer_id);
  CHECK(values_in(f.client, "unknown").empty());
  CHECK(f.broker.metrics().idempotence.unknown_producer_batches == 1);
  CHECK(f.log.contains("producer id 7 was not issued by this broker since it started"));
  // An issued id that starts on a partition past sequence 0 is unknown there too.
  const std::int64_t id = f.client.init_producer_id().producer_id;
  CHECK(f.client.produce_one("unknown", 0, values({"y"}), 1, 30000, stamp(id, 0, 9)).error_code ==
        pb::Errc::unknown_producer_id);
}

TEST_CASE("an idempotent batch without an epoch or a sequence is INVALID_RECORD (87)") {
  Fixture f;
  const std::int64_t id = f.client.init_producer_id().producer_id;
  CHECK(f.client.produce_one("bad", 0, values({"x"}), 1, 30000, stamp(id, -1, 0)).error_code ==
        pb::Errc::invalid_record);
  CHECK(f.client.produce_one("bad", 0, values({"x"}), 1, 30000, stamp(id, 0, -1)).error_code ==
        pb::Errc::invalid_record);
}

TEST_CASE("--fault-drop-produce-response 2: the 2nd answer is lost, its retry gets the offset") {
  Fixture f([](pb::BrokerConfig& c) { c.fault_drop_produce_response_every = 2; });
  const std::int64_t id = f.client.init_producer_id().producer_id;
  CHECK(
      f.client.produce_one("fault", 0, values({"a", "b"}), 1, 30000, stamp(id, 0, 0)).base_offset ==
      0);
  const pb::Bytes second = produce_frame("fault", {"c"}, stamp(id, 0, 2), 1, 77);
  f.client.write(second);
  CHECK(f.client.closed_by_peer_within(std::chrono::seconds(10)));
  CHECK(f.log.contains("fault: Produce v3 corr=77"));
  pb::Client retry;
  retry.connect("127.0.0.1", f.broker.port());
  retry.write(second);
  const pb::ProducePartitionResponse r = answer(retry);
  CHECK(r.error_code == pb::Errc::none);
  CHECK(r.base_offset == 2);
  CHECK(values_in(retry, "fault") == std::vector<std::string>{"a", "b", "c"});
}
