// Fetch: answered at once when min_bytes are readable (or there is an error), else parked in the
// fetch purgatory on its partitions.
#include <algorithm>
#include <vector>

#include "purgatory/broker/broker.hpp"
#include "requests/fetch_operation.hpp"
#include "requests/outcome_log.hpp"

namespace purgatory::broker {

void Broker::handle_fetch(const ResponseSlot& slot, FetchRequest req) {
  // Kafka's fetch.max.bytes: whatever the client asks, no bigger response (KIP-74's first batch
  // aside).
  req.max_bytes = std::min(req.max_bytes, config_.fetch_max_bytes);
  std::vector<TopicPartition> keys;
  for (const FetchTopic& t : req.topics) {
    for (const FetchPartition& p : t.partitions) {
      TopicPartition tp{t.topic, p.partition};
      if (log_.find(tp) != nullptr && std::find(keys.begin(), keys.end(), tp) == keys.end()) {
        keys.push_back(std::move(tp));
      }
    }
  }
  const auto op = make_operation<DelayedFetch>(log_, std::move(req), slot, outcomes_.get());
  if (keys.empty()) {
    // Nothing to watch (no partition exists): answer now with the errors.
    op->force_complete();
    return;
  }
  slot.conn->park(slot, op);
  if (!fetch_purgatory_->try_complete_else_watch(op, keys)) op->mark_parked();
}

}  // namespace purgatory::broker
