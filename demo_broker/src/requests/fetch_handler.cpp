#include "requests/fetch_handler.hpp"

#include <algorithm>
#include <vector>

#include "requests/fetch_operation.hpp"

namespace purgatory::broker {

FetchHandler::FetchHandler(const LogStore& log, const std::shared_ptr<SystemTimer>& timer,
                           OutcomeLog& outcomes, const Logger& logger, std::int32_t fetch_max_bytes)
    : log_(log),
      outcomes_(outcomes),
      purgatory_(make_partition_purgatory(timer, "fetch", logger)),
      fetch_max_bytes_(fetch_max_bytes) {}

void FetchHandler::handle(const ResponseSlot& slot, FetchRequest req) {
  // Kafka's fetch.max.bytes: whatever the client asks, no bigger response (KIP-74's first batch
  // aside).
  req.max_bytes = std::min(req.max_bytes, fetch_max_bytes_);
  std::vector<TopicPartition> keys;
  for (const FetchTopic& t : req.topics) {
    for (const FetchPartition& p : t.partitions) {
      TopicPartition tp{t.topic, p.partition};
      if (log_.find(tp) != nullptr && std::find(keys.begin(), keys.end(), tp) == keys.end()) {
        keys.push_back(std::move(tp));
      }
    }
  }
  const auto op = make_operation<DelayedFetch>(log_, std::move(req), slot, &outcomes_);
  if (keys.empty()) {
    // Nothing to watch (no partition exists): answer now with the errors.
    op->force_complete();
    return;
  }
  slot.conn->park(slot, op);
  if (!purgatory_->try_complete_else_watch(op, keys)) op->mark_parked();
}

void FetchHandler::handle(const ResponseSlot& slot, const ListOffsetsRequest& req) {
  ListOffsetsResponse resp;
  for (const ListOffsetsTopic& t : req.topics) {
    ListOffsetsTopicResponse& tr = resp.topics.emplace_back();
    tr.name = t.name;
    for (const ListOffsetsPartition& p : t.partitions) {
      ListOffsetsPartitionResponse& pr = tr.partitions.emplace_back();
      pr.partition_index = p.partition_index;
      const PartitionLog* pl = log_.find(TopicPartition{t.name, p.partition_index});
      if (pl == nullptr) {
        pr.error_code = Errc::unknown_topic_or_partition;
        continue;
      }
      if (p.timestamp == kEarliestTimestamp) {
        pr.offset = pl->log_start_offset();
      } else if (p.timestamp == kLatestTimestamp) {
        pr.offset = pl->high_watermark();  // what a consumer may read up to
      } else if (const auto offset = pl->offset_for_timestamp(p.timestamp)) {
        pr.offset = *offset;
        pr.timestamp = p.timestamp;
      }
    }
  }
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id), "ok");
}

}  // namespace purgatory::broker
