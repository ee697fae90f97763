#include "fetch_operation.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include <fmt/format.h>

namespace purgatory::broker {

namespace {

Nanos fetch_timeout(const FetchRequest& req) {
  return std::chrono::milliseconds(std::max<std::int32_t>(req.max_wait_ms, 0));
}

std::size_t partition_limit(const FetchPartition& p) {
  return static_cast<std::size_t>(std::max<std::int32_t>(p.partition_max_bytes, 0));
}

}  // namespace

std::size_t fetchable_bytes(const LogStore& log, const FetchRequest& req) {
  std::size_t total = 0;
  for (const FetchTopic& t : req.topics) {
    for (const FetchPartition& p : t.partitions) {
      const PartitionLog* pl = log.find(TopicPartition{t.topic, p.partition});
      if (pl == nullptr || !pl->in_range(p.fetch_offset)) continue;
      total += std::min(pl->bytes_available(p.fetch_offset), partition_limit(p));
    }
  }
  return total;
}

bool fetch_has_error(const LogStore& log, const FetchRequest& req) {
  for (const FetchTopic& t : req.topics) {
    for (const FetchPartition& p : t.partitions) {
      const PartitionLog* pl = log.find(TopicPartition{t.topic, p.partition});
      if (pl == nullptr || !pl->in_range(p.fetch_offset)) return true;
    }
  }
  return false;
}

bool fetch_satisfied(const LogStore& log, const FetchRequest& req) {
  if (req.max_wait_ms <= 0 || req.min_bytes <= 0 || req.topics.empty()) return true;
  if (fetch_has_error(log, req)) return true;
  return fetchable_bytes(log, req) >= static_cast<std::size_t>(req.min_bytes);
}

FetchResponse build_fetch_response(const LogStore& log, const FetchRequest& req,
                                   std::size_t& total_bytes) {
  FetchResponse resp;
  std::size_t budget = static_cast<std::size_t>(std::max<std::int32_t>(req.max_bytes, 0));
  bool min_one = true;
  resp.responses.reserve(req.topics.size());
  for (const FetchTopic& t : req.topics) {
    FetchTopicResponse& tr = resp.responses.emplace_back();
    tr.topic = t.topic;
    tr.partitions.reserve(t.partitions.size());
    for (const FetchPartition& p : t.partitions) {
      FetchPartitionResponse& pr = tr.partitions.emplace_back();
      pr.partition_index = p.partition;
      pr.records = Bytes();
      const PartitionLog* pl = log.find(TopicPartition{t.topic, p.partition});
      if (pl == nullptr) {
        pr.error_code = Errc::unknown_topic_or_partition;
        pr.high_watermark = -1;
        pr.last_stable_offset = -1;
        continue;
      }
      pr.high_watermark = pl->high_watermark();
      // No transactions here: everything below the HW is stable. Empty, not null: some clients
      // treat a null list as a malformed response.
      pr.last_stable_offset = pl->high_watermark();
      pr.aborted_transactions.emplace();
      if (!pl->in_range(p.fetch_offset)) {
        pr.error_code = Errc::offset_out_of_range;
        continue;
      }
      Bytes records = pl->read(p.fetch_offset, std::min(partition_limit(p), budget), min_one);
      if (!records.empty()) {
        min_one = false;
        budget -= std::min(budget, records.size());
        total_bytes += records.size();
      }
      pr.records = std::move(records);
    }
  }
  return resp;
}

DelayedFetch::DelayedFetch(const LogStore& log, FetchRequest request, ResponseSlot slot,
                           OutcomeLog* outcomes)
    : DelayedOperation(fetch_timeout(request)),
      log_(log),
      request_(std::move(request)),
      slot_(std::move(slot)),
      outcomes_(outcomes) {}

bool DelayedFetch::try_complete() {
  return fetch_satisfied(log_, request_) && force_complete();
}

void DelayedFetch::on_complete() {
  std::string how;
  switch (outcome()) {
    case Outcome::completed:
      how = parked_ ? "completed early" : "answered at once";
      break;
    case Outcome::expired:
      how = fmt::format("expired after max_wait_ms={}", request_.max_wait_ms);
      break;
    default:
      how = "cancelled (broker shutting down)";
      break;
  }
  if (parked_ && outcomes_ != nullptr) record_outcome();
  if (!slot_.conn->is_open()) {
    slot_.conn->respond_nothing(slot_, "abandoned: the client disconnected");
    return;
  }
  // Built when the connection gets to it, from the log as it is then (see the header): a client
  // that does not read holds one encoded response, not one per Fetch it pipelined.
  slot_.conn->respond_deferred(
      slot_, std::move(how),
      [&log = log_, request = request_, version = slot_.version,
       correlation_id = slot_.correlation_id](std::string& outcome) {
        std::size_t bytes = 0;
        // The response (a copy of the records) is a temporary: freed once encoded.
        Bytes frame =
            encode_response(build_fetch_response(log, request, bytes), version, correlation_id);
        outcome += fmt::format(", {} record bytes (min_bytes={})", bytes, request.min_bytes);
        return frame;
      });
}

void DelayedFetch::record_outcome() {
  OutcomeEvent e;
  e.at = std::chrono::steady_clock::now();
  e.purgatory = "fetch";
  e.key = outcome_key(request_);
  e.waited_ms = std::chrono::duration<double, std::milli>(e.at - arrived_).count();
  const std::size_t bytes = fetchable_bytes(log_, request_);
  switch (outcome()) {
    case Outcome::completed:
      if (!slot_.conn->is_open()) {
        e.outcome = "abandoned";
        e.why = "the client disconnected";
      } else if (fetch_has_error(log_, request_)) {
        e.outcome = "completed early";
        e.why = "a partition has an error to report";
      } else {
        e.outcome = "completed early";
        e.why = fmt::format("min_bytes reached: {} of {} bytes", bytes, request_.min_bytes);
      }
      break;
    case Outcome::expired:
      e.outcome = "expired";
      e.why = fmt::format("max_wait_ms={} passed with {} of {} bytes", request_.max_wait_ms, bytes,
                          request_.min_bytes);
      break;
    default:
      e.outcome = "shut down";
      e.why = "the broker is stopping";
      break;
  }
  outcomes_->add(std::move(e));
}

std::string outcome_key(const FetchRequest& req) {
  std::size_t partitions = 0;
  std::string first;
  for (const FetchTopic& t : req.topics) {
    for (const FetchPartition& p : t.partitions) {
      if (partitions++ == 0) first = fmt::format("{}-{}", t.topic, p.partition);
    }
  }
  return partitions <= 1 ? first : fmt::format("{} +{}", first, partitions - 1);
}

}  // namespace purgatory::broker
