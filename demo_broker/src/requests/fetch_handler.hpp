// FetchHandler: Fetch and ListOffsets, the reads of the log. A Fetch is answered at once when
// min_bytes are readable (or a partition has an error), else it waits as a DelayedFetch in the
// fetch purgatory, which this handler owns, watched on its partitions, until a high-watermark move
// makes enough bytes readable or max_wait_ms passes. ListOffsets tells a consumer where to start:
// the log start, the high watermark, or the first offset at a timestamp.
#pragma once

#include <cstdint>
#include <memory>

#include "log/log_store.hpp"
#include "protocol/codec.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "requests/logger.hpp"
#include "requests/outcome_log.hpp"
#include "requests/partition_purgatory.hpp"
#include "requests/responder.hpp"

namespace purgatory::broker {

// Call only from the broker's io thread, except purgatory().metrics(), which is thread-safe.
class FetchHandler {
 public:
  // `fetch_max_bytes` (> 0) caps every Fetch's max_bytes (Kafka's fetch.max.bytes). Every
  // reference must outlive the handler.
  FetchHandler(const LogStore& log, const std::shared_ptr<SystemTimer>& timer, OutcomeLog& outcomes,
               const Logger& logger, std::int32_t fetch_max_bytes);

  void handle(const ResponseSlot& slot, FetchRequest req);
  void handle(const ResponseSlot& slot, const ListOffsetsRequest& req);

  // The high watermark of `tp` moved: the fetches waiting on it are tried.
  void on_high_watermark_advanced(const TopicPartition& tp) { purgatory_->check_and_complete(tp); }
  // Gives every waiting fetch its outcome (Outcome::shut_down for most). Idempotent.
  void shutdown() { purgatory_->shutdown(); }

  [[nodiscard]] const Purgatory& purgatory() const noexcept { return *purgatory_; }

 private:
  const LogStore& log_;
  OutcomeLog& outcomes_;
  std::unique_ptr<Purgatory> purgatory_;
  const std::int32_t fetch_max_bytes_;
};

}  // namespace purgatory::broker
