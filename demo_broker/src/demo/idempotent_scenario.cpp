#include "idempotent_scenario.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "demo/client.hpp"
#include "protocol/records.hpp"

namespace purgatory::broker {

namespace {

// One batch of `values` from `producer`, acks=-1: what a producer sends, and resends unchanged.
ProduceRequest batch_request(const std::string& topic, const std::vector<std::string>& values,
                             const BatchProducer& producer) {
  std::vector<ProducerRecord> records;
  for (const std::string& v : values)
    records.push_back({std::nullopt, v});
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  ProduceRequest req;
  req.acks = -1;
  req.timeout_ms = 3000;
  req.topics = {{topic, {{0, build_record_batch(records, now.count(), 0, producer)}}}};
  return req;
}

const ProducePartitionResponse& only_partition(const ProduceResponse& resp) {
  if (resp.responses.size() != 1 || resp.responses[0].partitions.size() != 1) {
    throw ClientError("produce: the response does not answer exactly one partition");
  }
  return resp.responses[0].partitions[0];
}

}  // namespace

void run_idempotent_scenario(std::uint16_t port, const std::function<IdempotenceStats()>& stats,
                             const ScenarioOutput& out) {
  const std::string topic = "idempotent";
  Client producer("demo-idempotent");
  producer.connect("127.0.0.1", port);
  const InitProducerIdResponse id = producer.init_producer_id();
  out.at("producer", fmt::format("InitProducerId -> producer id {}, epoch {}: it numbers its "
                                 "records 0, 1, 2, ... on each partition",
                                 id.producer_id, id.producer_epoch));
  out.check(id.error_code == Errc::none && id.producer_epoch == 0,
            "an idempotent producer gets a producer id at epoch 0");

  const ProduceRequest first =
      batch_request(topic, {"one", "two", "three"}, {id.producer_id, 0, 0, 2});
  const ProducePartitionResponse r1 = only_partition(producer.produce(first));
  out.at("producer", fmt::format("Produce sequences 0..2 (acks=-1) -> {} at offset {}",
                                 errc_name(r1.error_code), r1.base_offset));

  const ProduceRequest second =
      batch_request(topic, {"four", "five", "six"}, {id.producer_id, 0, 3, 2});
  producer.send(second, kProduceVersion);
  out.at("producer", "Produce sequences 3..5 (acks=-1): sent, waiting for the answer");
  bool lost = false;
  try {
    (void)producer.receive<ProduceResponse>(kProduceVersion);
  } catch (const ClientError& e) {
    lost = true;
    out.at("producer", fmt::format("no answer: {}. Were the records written? It cannot know, so "
                                   "it retries the same batch",
                                   e.what()));
  }
  out.check(lost, "the broker appended sequences 3..5, then lost the answer with the connection");

  producer.connect("127.0.0.1", port);
  const ProducePartitionResponse retry = only_partition(producer.produce(second));
  out.at("producer", fmt::format("retry of sequences 3..5 on a new connection -> {} at offset {}",
                                 errc_name(retry.error_code), retry.base_offset));
  out.check(retry.error_code == Errc::none && retry.base_offset == 3,
            "the retry is answered with the first attempt's offset (3): the broker remembered "
            "the batch, and appended nothing");

  const FetchPartitionResponse log = producer.fetch_one(topic, 0, 0, 3000, 1);
  std::vector<std::string> values;
  if (log.records) {
    for (const ConsumerRecord& r : parse_record_batches(*log.records))
      values.push_back(r.value.value_or(""));
  }
  out.at("consumer",
         fmt::format("Fetch {}-0 from offset 0: {} records ({}), high watermark {}", topic,
                     values.size(), fmt::join(values, ", "), log.high_watermark));
  out.check(values == std::vector<std::string>{"one", "two", "three", "four", "five", "six"},
            "the log holds the 6 records once each, in order");
  const IdempotenceStats s = stats();
  out.check(
      s.duplicate_batches == 1,
      fmt::format("the broker counted {} duplicate batch (demo_broker_duplicate_batches_total)",
                  s.duplicate_batches));
}

}  // namespace purgatory::broker
