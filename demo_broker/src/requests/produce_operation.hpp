// DelayedProduce: Kafka's DelayedProduce for the demo broker. A Produce with acks=-1 is appended
// at once, then waits in the produce purgatory, watched on each partition it wrote, until the
// high watermark of every one of them reaches the end of what it appended (every simulated
// follower has replicated it) or its timeout_ms passes. On timeout the partitions not yet
// replicated answer REQUEST_TIMED_OUT; their data stays in the log, as in Kafka.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "log/log_store.hpp"
#include "protocol/produce.hpp"
#include "purgatory/delayed_operation.hpp"
#include "requests/outcome_log.hpp"
#include "requests/responder.hpp"

namespace purgatory::broker {

// Call only from the broker's io thread (the purgatory's timer expires it there too).
class DelayedProduce final : public DelayedOperation {
 public:
  // A partition the request appended to, and where its answer goes in the response.
  struct Appended {
    TopicPartition tp;
    std::int64_t required_offset = 0;  // the log end right after the append
    std::size_t topic_index = 0;
    std::size_t partition_index = 0;
  };

  // `response` already holds every partition's answer; those in `appended` are settled when the
  // operation completes. `outcomes` (may be null) is told how a parked produce ended.
  DelayedProduce(Nanos timeout, const LogStore& log, ProduceResponse response,
                 std::vector<Appended> appended, ResponseSlot slot, OutcomeLog* outcomes = nullptr);

  [[nodiscard]] std::vector<TopicPartition> keys() const;
  void mark_parked() noexcept { parked_ = true; }

 protected:
  bool try_complete() override;
  void on_complete() override;

 private:
  [[nodiscard]] bool replicated(const Appended& a) const;

  const LogStore& log_;
  ProduceResponse response_;
  const std::vector<Appended> appended_;
  const ResponseSlot slot_;
  OutcomeLog* const outcomes_;
  const std::chrono::steady_clock::time_point arrived_ = std::chrono::steady_clock::now();
  bool parked_ = false;
};

}  // namespace purgatory::broker
