#include "requests/produce_handler.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

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

// The error for a valid batch Kafka's idempotence rules refuse before the log is asked (a
// transaction, a control batch, an idempotent batch without epoch or sequence), or none.
Errc check_producer(const ProduceRequest& req, const RecordSetInfo& info, std::string& why) {
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

// ", producer 7 epoch 0 sequences 5..9" for an idempotent batch, "" for another.
std::string describe_producer(const BatchProducer& p) {
  if (!p.idempotent()) return {};
  return fmt::format(", producer {} epoch {} sequences {}..{}", p.producer_id, p.producer_epoch,
                     p.base_sequence, p.last_sequence());
}

}  // namespace

struct ProduceHandler::Appends {
  ProduceResponse response;  // every partition's answer so far
  // The partitions appended (or answered as duplicates): what acks=-1 waits for.
  std::vector<DelayedProduce::Appended> appended;
  std::vector<std::string> problems;  // for the request's log line
  std::size_t duplicates = 0;
};

ProduceHandler::ProduceHandler(LogStore& log, const std::shared_ptr<SystemTimer>& timer,
                               Replication& replication, OutcomeLog& outcomes, const Logger& logger)
    : log_(log),
      replication_(replication),
      outcomes_(outcomes),
      logger_(logger),
      purgatory_(make_partition_purgatory(timer, "produce", logger)),
      first_producer_id_(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count()),
      next_producer_id_(first_producer_id_) {}

ProduceHandler::~ProduceHandler() = default;

void ProduceHandler::handle(const ResponseSlot& slot, ProduceRequest req) {
  if (req.acks != -1 && req.acks != 0 && req.acks != 1) {
    refuse_acks(slot, req);
    return;
  }
  Appends appends = append_all(req);
  answer(slot, req, std::move(appends));
}

void ProduceHandler::refuse_acks(const ResponseSlot& slot, const ProduceRequest& req) {
  ProduceResponse resp;
  resp.responses.reserve(req.topics.size());
  for (const ProduceTopicData& t : req.topics) {
    ProduceTopicResponse& tr = resp.responses.emplace_back();
    tr.name = t.name;
    for (const ProducePartitionData& p : t.partitions) {
      ProducePartitionResponse& pr = tr.partitions.emplace_back();
      pr.index = p.index;
      pr.error_code = Errc::invalid_required_acks;
    }
  }
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id),
                     fmt::format("INVALID_REQUIRED_ACKS (acks={})", req.acks));
}

ProduceHandler::Appends ProduceHandler::append_all(ProduceRequest& req) {
  Appends appends;
  appends.response.responses.reserve(req.topics.size());
  for (ProduceTopicData& t : req.topics) {
    appends.response.responses.emplace_back().name = t.name;
    std::vector<PartitionLog>* logs = log_.get_or_create(t.name);
    for (ProducePartitionData& p : t.partitions)
      append_partition(req, t.name, logs, p, appends);
  }
  return appends;
}

void ProduceHandler::append_partition(const ProduceRequest& req, const std::string& topic,
                                      std::vector<PartitionLog>* logs, ProducePartitionData& p,
                                      Appends& appends) {
  ProduceTopicResponse& tr = appends.response.responses.back();
  ProducePartitionResponse& pr = tr.partitions.emplace_back();
  pr.index = p.index;
  if (logs == nullptr) {
    pr.error_code = is_valid_topic_name(topic) ? Errc::unknown_topic_or_partition
                                               : Errc::invalid_topic_exception;
    appends.problems.push_back(fmt::format("{}: {}", topic, errc_name(pr.error_code)));
    return;
  }
  PartitionLog* pl = log_.find(topic, p.index);
  if (pl == nullptr) {
    pr.error_code = Errc::unknown_topic_or_partition;
    appends.problems.push_back(fmt::format("{}-{}: no such partition", topic, p.index));
    return;
  }
  RecordSetInfo info;
  std::string why;
  pr.error_code = validate(req, p.records, info, why);
  const TopicPartition tp{topic, p.index};
  const std::int64_t before_hw = pl->high_watermark();
  AppendResult r;
  if (pr.error_code == Errc::none) {
    r = append_batch(tp, *pl, std::move(*p.records), info);
    pr.error_code = r.error;
    why = r.why;
  }
  if (pr.error_code != Errc::none) {
    // Nothing of this partition is appended; what the log held before is untouched.
    appends.problems.push_back(
        fmt::format("{}-{}: {} ({})", topic, p.index, errc_name(pr.error_code), why));
    return;
  }
  pr.base_offset = r.base_offset;
  // A retry waits for its original's replication, as Kafka's acks=-1 does.
  appends.appended.push_back(DelayedProduce::Appended{
      tp, r.next_offset, appends.response.responses.size() - 1, tr.partitions.size() - 1});
  if (r.duplicate) {
    ++appends.duplicates;
    return;  // nothing new to replicate
  }
  logger_.event(fmt::format("appended {} record(s) to {}-{} at offset {} (log end {}){}",
                            info.offset_count, topic, p.index, pr.base_offset, pl->log_end_offset(),
                            describe_producer(info.producer)));
  replication_.appended(tp, *pl, before_hw);
}

Errc ProduceHandler::validate(const ProduceRequest& req, const std::optional<Bytes>& records,
                              RecordSetInfo& info, std::string& why) {
  Errc error = check_records(records, info, why);
  if (error == Errc::none) error = check_producer(req, info, why);
  if (error == Errc::transactional_id_authorization_failed) {
    transactional_refused_.fetch_add(1, std::memory_order_relaxed);
  }
  return error;
}

AppendResult ProduceHandler::append_batch(const TopicPartition& tp, PartitionLog& log, Bytes batch,
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
  count(r);
  if (r.duplicate) {
    logger_.event(fmt::format("duplicate batch on {}-{}: {}; answered with offset {}", tp.topic,
                              tp.partition, r.why, r.base_offset));
  } else if (r.error != Errc::none) {
    logger_.event(fmt::format("refused batch on {}-{}: {} ({})", tp.topic, tp.partition,
                              errc_name(r.error), r.why));
  }
  return r;
}

void ProduceHandler::count(const AppendResult& r) {
  if (r.producer_added) producer_states_.fetch_add(1, std::memory_order_relaxed);
  if (r.producer_forgotten) {
    producer_states_.fetch_sub(1, std::memory_order_relaxed);
    producer_states_forgotten_.fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<std::uint64_t>* refused = nullptr;
  switch (r.error) {
    case Errc::duplicate_sequence_number:
      refused = &duplicate_batches_;
      break;
    case Errc::out_of_order_sequence_number:
      refused = &out_of_order_batches_;
      break;
    case Errc::invalid_producer_epoch:
      refused = &stale_epoch_batches_;
      break;
    case Errc::unknown_producer_id:
      refused = &unknown_producer_batches_;
      break;
    default:
      break;
  }
  if (refused != nullptr) refused->fetch_add(1, std::memory_order_relaxed);
  if (r.duplicate) duplicate_batches_.fetch_add(1, std::memory_order_relaxed);
}

void ProduceHandler::answer(const ResponseSlot& slot, const ProduceRequest& req, Appends appends) {
  std::string summary = fmt::format("acks={}, {} partition(s) appended", req.acks,
                                    appends.appended.size() - appends.duplicates);
  if (appends.duplicates > 0) {
    summary += fmt::format(", {} retried batch(es) answered with their original offset",
                           appends.duplicates);
  }
  for (const std::string& p : appends.problems)
    summary += "; " + p;
  if (req.acks == 0) {
    slot.conn->respond_nothing(slot, summary + ", no response (acks=0)");
    if (!appends.problems.empty()) {
      // The producer reads no response, so closing is the only way to tell it (Kafka does this).
      logger_.log(fmt::format("conn {} {}: acks=0 produce failed ({}), closing", slot.conn->id(),
                              slot.conn->peer(), summary));
      slot.conn->close("acks=0 produce failed");
    }
    return;
  }
  if (req.acks == 1 || appends.appended.empty()) {
    slot.conn->respond(slot, encode_response(appends.response, slot.version, slot.correlation_id),
                       summary);
    return;
  }
  park(slot, req.timeout_ms, std::move(appends));
}

void ProduceHandler::park(const ResponseSlot& slot, std::int32_t timeout_ms, Appends appends) {
  const auto timeout = std::chrono::milliseconds(std::max<std::int32_t>(timeout_ms, 0));
  const auto op = make_operation<DelayedProduce>(timeout, log_, std::move(appends.response),
                                                 std::move(appends.appended), slot, &outcomes_);
  const std::vector<TopicPartition> keys = op->keys();
  slot.conn->park(slot, op);
  if (!purgatory_->try_complete_else_watch(op, keys)) op->mark_parked();
}

void ProduceHandler::handle(const ResponseSlot& slot, const RequestHeader& header,
                            const InitProducerIdRequest& req) {
  InitProducerIdResponse resp;
  std::string outcome;
  const std::string client = header.client_id.value_or("");
  if (req.transactional_id) {
    // Kafka answers an empty transactional id INVALID_REQUEST; any other one it would look up in
    // its transaction coordinator, which this broker does not have. Every client treats
    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED as fatal, so a transactional producer stops at once
    // with it instead of retrying.
    resp.error_code = req.transactional_id->empty() ? Errc::invalid_request
                                                    : Errc::transactional_id_authorization_failed;
    transactional_refused_.fetch_add(1, std::memory_order_relaxed);
    outcome = fmt::format(
        "{}: transactional id '{}' refused, demo_broker does not speak transactions (an "
        "idempotent producer, without a transactional id, is served)",
        errc_name(resp.error_code), *req.transactional_id);
    logger_.log(fmt::format("conn {} {} [{}]: InitProducerId {}", slot.conn->id(),
                            slot.conn->peer(), client, outcome));
  } else {
    // A new id, epoch 0, for each idempotent producer that asks, as Kafka's broker does for a
    // null transactional id (even one that names its current id and epoch, v3+: its state on
    // each partition stays, and the new id starts its sequences at 0).
    resp.producer_id = next_producer_id_++;
    resp.producer_epoch = 0;
    producer_ids_issued_.fetch_add(1, std::memory_order_relaxed);
    outcome = fmt::format("producer id {} epoch 0", resp.producer_id);
    if (req.producer_id >= 0) {
      outcome +=
          fmt::format(" (replaces producer id {} epoch {})", req.producer_id, req.producer_epoch);
    }
    logger_.event(fmt::format("issued {} to {} [{}]", outcome, slot.conn->peer(), client));
  }
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id), outcome);
}

IdempotenceStats ProduceHandler::idempotence() const {
  IdempotenceStats i;
  i.producer_ids_issued = producer_ids_issued_.load(std::memory_order_relaxed);
  i.transactional_refused = transactional_refused_.load(std::memory_order_relaxed);
  i.producer_states = producer_states_.load(std::memory_order_relaxed);
  i.producer_states_forgotten = producer_states_forgotten_.load(std::memory_order_relaxed);
  i.duplicate_batches = duplicate_batches_.load(std::memory_order_relaxed);
  i.out_of_order_batches = out_of_order_batches_.load(std::memory_order_relaxed);
  i.stale_epoch_batches = stale_epoch_batches_.load(std::memory_order_relaxed);
  i.unknown_producer_batches = unknown_producer_batches_.load(std::memory_order_relaxed);
  return i;
}

}  // namespace purgatory::broker
