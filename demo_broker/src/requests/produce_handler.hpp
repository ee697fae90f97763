// ProduceHandler: Produce and InitProducerId, the writes of the log. A Produce has every
// partition's batch validated and appended (an idempotent producer's checked against the
// partition's producer state, a retry answered with its original offset), starts the followers'
// catch-up (Replication), then is answered according to acks: 0 nothing, 1 now, -1 once
// replicated, waiting as a DelayedProduce in the produce purgatory, which this handler owns (a
// retry also waits there until its original is replicated). InitProducerId hands out the
// producer ids that the idempotent batches carry, so the handler that checks a batch's id is the
// one that issued it; a transactional id is refused (demo_broker does not speak transactions).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "log/log_store.hpp"
#include "protocol/codec.hpp"
#include "protocol/record_batch.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "requests/idempotence_stats.hpp"
#include "requests/logger.hpp"
#include "requests/outcome_log.hpp"
#include "requests/partition_purgatory.hpp"
#include "requests/replication.hpp"
#include "requests/responder.hpp"

namespace purgatory::broker {

// Call only from the broker's io thread, except idempotence() and purgatory().metrics(), which
// are thread-safe.
class ProduceHandler {
 public:
  // Every reference must outlive the handler.
  ProduceHandler(LogStore& log, const std::shared_ptr<SystemTimer>& timer, Replication& replication,
                 OutcomeLog& outcomes, const Logger& logger);
  ~ProduceHandler();
  ProduceHandler(const ProduceHandler&) = delete;
  ProduceHandler& operator=(const ProduceHandler&) = delete;

  void handle(const ResponseSlot& slot, ProduceRequest req);
  void handle(const ResponseSlot& slot, const RequestHeader& header,
              const InitProducerIdRequest& req);

  // The high watermark of `tp` moved: the produces waiting for it are tried.
  void on_high_watermark_advanced(const TopicPartition& tp) { purgatory_->check_and_complete(tp); }
  // Gives every waiting produce its outcome (Outcome::shut_down for most). Idempotent.
  void shutdown() { purgatory_->shutdown(); }

  [[nodiscard]] const Purgatory& purgatory() const noexcept { return *purgatory_; }
  [[nodiscard]] IdempotenceStats idempotence() const;

 private:
  struct Appends;  // what one Produce did, partition by partition

  void refuse_acks(const ResponseSlot& slot, const ProduceRequest& req);
  [[nodiscard]] Appends append_all(ProduceRequest& req);
  void append_partition(const ProduceRequest& req, const std::string& topic,
                        std::vector<PartitionLog>* logs, ProducePartitionData& p, Appends& appends);
  // The error for a partition's batch before the log is asked, or none; `why` says why.
  Errc validate(const ProduceRequest& req, const std::optional<Bytes>& records, RecordSetInfo& info,
                std::string& why);
  // Appends one partition's validated batch (idempotence checked in the log), counting and
  // logging what became of it; the Kafka error for the partition, `why` filled for a refusal.
  AppendResult append_batch(const TopicPartition& tp, PartitionLog& log, Bytes batch,
                            const RecordSetInfo& info);
  void count(const AppendResult& r);
  void answer(const ResponseSlot& slot, const ProduceRequest& req, Appends appends);
  void park(const ResponseSlot& slot, std::int32_t timeout_ms, Appends appends);

  LogStore& log_;
  Replication& replication_;
  OutcomeLog& outcomes_;
  const Logger& logger_;
  std::unique_ptr<Purgatory> purgatory_;

  // Producer ids: handed out in order from the broker's start time in milliseconds, so an id of
  // an earlier run of the broker (whose log is gone with it) is one this run never issued.
  std::int64_t first_producer_id_ = 0;
  std::int64_t next_producer_id_ = 0;
  std::atomic<std::uint64_t> producer_ids_issued_{0};
  std::atomic<std::uint64_t> transactional_refused_{0};
  std::atomic<std::uint64_t> producer_states_{0};
  std::atomic<std::uint64_t> producer_states_forgotten_{0};
  std::atomic<std::uint64_t> duplicate_batches_{0};
  std::atomic<std::uint64_t> out_of_order_batches_{0};
  std::atomic<std::uint64_t> stale_epoch_batches_{0};
  std::atomic<std::uint64_t> unknown_producer_batches_{0};
};

}  // namespace purgatory::broker
