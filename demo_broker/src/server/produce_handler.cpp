// Produce: validate and append every partition's batch (an idempotent producer's checked against
// the partition's producer state, a retry answered with its original offset), start the
// followers' catch-up, then answer according to acks: 0 nothing, 1 now, -1 once replicated (the
// produce purgatory; a retry also waits there until its original is replicated).
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "purgatory/broker/broker.hpp"
#include "purgatory/broker/record_batch.hpp"
#include "requests/outcome_log.hpp"
#include "requests/produce_operation.hpp"

namespace purgatory::broker {

namespace {

// The error for a partition's records, or none: exactly one valid magic-2 batch (Kafka's rule
// for Produce v3+).
Errc check_records(const std::optional<Bytes>& records, RecordSetInfo& info, std::string& why) {
  if (!records || records->empty()) {
    why = "no records";
    return Errc::invalid_record;
  }
  try {
    info = validate_record_batches(*records);
  } catch (const DecodeError& e) {
    why = e.what();
    return e.kafka_error();  // CORRUPT_MESSAGE
  }
  if (info.batch_count != 1) {
    why = fmt::format("{} batches, Produce v3 carries exactly one per partition", info.batch_count);
    return Errc::invalid_record;
  }
  return Errc::none;
}

}  // namespace

Errc Broker::check_producer(const ProduceRequest& req, const RecordSetInfo& info,
                            std::string& why) const {
  if (req.transactional_id || info.transactional) {
    why = req.transactional_id
              ? fmt::format("transactional id '{}': demo_broker does not speak transactions",
                            *req.transactional_id)
              : std::string("a transactional batch: demo_broker does not speak transactions");
    return Errc::transactional_id_authorization_failed;
  }
  if (info.control) {
    why = "a control batch (a transaction marker) is written by brokers, not producers";
    return Errc::invalid_record;
  }
  const BatchProducer& p = info.producer;
  if (p.idempotent() && (p.producer_epoch < 0 || p.base_sequence < 0)) {
    why = fmt::format("producer id {} with epoch {} and base sequence {}: both must be >= 0",
                      p.producer_id, p.producer_epoch, p.base_sequence);
    return Errc::invalid_record;
  }
  return Errc::none;
}

AppendResult Broker::append_batch(const TopicPartition& tp, PartitionLog& log, Bytes batch,
                                  const RecordSetInfo& info) {
  const BatchProducer& producer = info.producer;
  AppendResult r;
  if (producer.idempotent() &&
      (producer.producer_id < first_producer_id_ || producer.producer_id >= next_producer_id_)) {
    r.error = Errc::unknown_producer_id;
    r.why = fmt::format("producer id {} was not issued by this broker since it started",
                        producer.producer_id);
  } else {
    r = log.append(std::move(batch), info);
  }
  if (r.producer_added) producer_states_.fetch_add(1, std::memory_order_relaxed);
  if (r.producer_forgotten) {
    producer_states_.fetch_sub(1, std::memory_order_relaxed);
    producer_states_forgotten_.fetch_add(1, std::memory_order_relaxed);
  }
  switch (r.error) {
    case Errc::none:
      break;
    case Errc::duplicate_sequence_number:
      duplicate_batches_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Errc::out_of_order_sequence_number:
      out_of_order_batches_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Errc::invalid_producer_epoch:
      stale_epoch_batches_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Errc::unknown_producer_id:
      unknown_producer_batches_.fetch_add(1, std::memory_order_relaxed);
      break;
    default:
      break;
  }
  if (r.duplicate) {
    duplicate_batches_.fetch_add(1, std::memory_order_relaxed);
    event(fmt::format("duplicate batch on {}-{}: {}; answered with offset {}", tp.topic,
                      tp.partition, r.why, r.base_offset));
  } else if (r.error != Errc::none) {
    event(fmt::format("refused batch on {}-{}: {} ({})", tp.topic, tp.partition, errc_name(r.error),
                      r.why));
  }
  return r;
}

void Broker::handle_produce(const ResponseSlot& slot, ProduceRequest req) {
  const bool valid_acks = req.acks == -1 || req.acks == 0 || req.acks == 1;
  ProduceResponse resp;
  std::vector<DelayedProduce::Appended> appended;
  std::vector<std::string> problems;
  std::size_t duplicates = 0;
  resp.responses.reserve(req.topics.size());
  for (ProduceTopicData& t : req.topics) {
    ProduceTopicResponse& tr = resp.responses.emplace_back();
    tr.name = t.name;
    std::vector<PartitionLog>* logs = valid_acks ? log_.get_or_create(t.name) : nullptr;
    for (ProducePartitionData& p : t.partitions) {
      ProducePartitionResponse& pr = tr.partitions.emplace_back();
      pr.index = p.index;
      if (!valid_acks) {
        pr.error_code = Errc::invalid_required_acks;
        continue;
      }
      if (logs == nullptr) {
        pr.error_code = is_valid_topic_name(t.name) ? Errc::unknown_topic_or_partition
                                                    : Errc::invalid_topic_exception;
        problems.push_back(fmt::format("{}: {}", t.name, errc_name(pr.error_code)));
        continue;
      }
      PartitionLog* pl = log_.find(t.name, p.index);
      if (pl == nullptr) {
        pr.error_code = Errc::unknown_topic_or_partition;
        problems.push_back(fmt::format("{}-{}: no such partition", t.name, p.index));
        continue;
      }
      RecordSetInfo info;
      std::string why;
      pr.error_code = check_records(p.records, info, why);
      if (pr.error_code == Errc::none) pr.error_code = check_producer(req, info, why);
      if (pr.error_code == Errc::transactional_id_authorization_failed) {
        transactional_refused_.fetch_add(1, std::memory_order_relaxed);
      }
      const TopicPartition tp{t.name, p.index};
      const std::int64_t before_hw = pl->high_watermark();
      AppendResult r;
      if (pr.error_code == Errc::none) {
        r = append_batch(tp, *pl, std::move(*p.records), info);
        pr.error_code = r.error;
        why = r.why;
      }
      if (pr.error_code != Errc::none) {
        // Nothing of this partition is appended; what the log held before is untouched.
        problems.push_back(
            fmt::format("{}-{}: {} ({})", t.name, p.index, errc_name(pr.error_code), why));
        continue;
      }
      pr.base_offset = r.base_offset;
      // A retry waits for its original's replication, as Kafka's acks=-1 does.
      appended.push_back(DelayedProduce::Appended{tp, r.next_offset, resp.responses.size() - 1,
                                                  tr.partitions.size() - 1});
      if (r.duplicate) {
        ++duplicates;
        continue;  // nothing new to replicate
      }
      event(
          fmt::format("appended {} record(s) to {}-{} at offset {} (log end {}){}",
                      info.offset_count, t.name, p.index, pr.base_offset, pl->log_end_offset(),
                      info.producer.idempotent()
                          ? fmt::format(", producer {} epoch {} sequences {}..{}",
                                        info.producer.producer_id, info.producer.producer_epoch,
                                        info.producer.base_sequence, info.producer.last_sequence())
                          : std::string()));
      if (pl->high_watermark() != before_hw) {
        on_high_watermark_advanced(tp, before_hw, pl->high_watermark());
      }
      replicate(tp, pl->log_end_offset());
    }
  }

  std::string summary =
      fmt::format("acks={}, {} partition(s) appended", req.acks, appended.size() - duplicates);
  if (duplicates > 0) {
    summary +=
        fmt::format(", {} retried batch(es) answered with their original offset", duplicates);
  }
  for (const std::string& p : problems)
    summary += "; " + p;
  if (!valid_acks) {
    slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id),
                       fmt::format("INVALID_REQUIRED_ACKS (acks={})", req.acks));
    return;
  }
  if (req.acks == 0) {
    slot.conn->respond_nothing(slot, summary + ", no response (acks=0)");
    if (!problems.empty()) {
      // The producer reads no response, so closing is the only way to tell it (Kafka does this).
      log(fmt::format("conn {} {}: acks=0 produce failed ({}), closing", slot.conn->id(),
                      slot.conn->peer(), summary));
      slot.conn->close("acks=0 produce failed");
    }
    return;
  }
  if (req.acks == 1 || appended.empty()) {
    slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id), summary);
    return;
  }
  const auto timeout = std::chrono::milliseconds(std::max<std::int32_t>(req.timeout_ms, 0));
  const auto op = make_operation<DelayedProduce>(timeout, log_, std::move(resp),
                                                 std::move(appended), slot, outcomes_.get());
  const std::vector<TopicPartition> keys = op->keys();
  slot.conn->park(slot, op);
  if (!produce_purgatory_->try_complete_else_watch(op, keys)) op->mark_parked();
}

}  // namespace purgatory::broker
