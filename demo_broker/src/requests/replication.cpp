#include "requests/replication.hpp"

#include <utility>

#include <fmt/format.h>

#include "purgatory/timer/timer_task.hpp"

namespace purgatory::broker {

Replication::Replication(LogStore& log, std::shared_ptr<SystemTimer> timer,
                         std::vector<std::chrono::milliseconds> delays, const Logger& logger,
                         OnAdvanced on_advanced)
    : log_(log),
      timer_(std::move(timer)),
      delays_(std::move(delays)),
      logger_(logger),
      on_advanced_(std::move(on_advanced)) {}

void Replication::appended(const TopicPartition& tp, const PartitionLog& log,
                           std::int64_t high_watermark_before) {
  if (log.high_watermark() != high_watermark_before) {
    advanced(tp, high_watermark_before, log.high_watermark());
  }
  const std::int64_t log_end = log.log_end_offset();
  for (std::size_t i = 0; i < delays_.size(); ++i) {
    timer_->add(make_task([this, tp, i, log_end] { caught_up(tp, i, log_end); }), delays_[i]);
  }
}

void Replication::set_delay(std::size_t follower, std::chrono::milliseconds delay) {
  delays_.at(follower) = delay;
}

void Replication::caught_up(const TopicPartition& tp, std::size_t follower, std::int64_t offset) {
  if (stopped_) return;
  PartitionLog* pl = log_.find(tp.topic, tp.partition);
  if (pl == nullptr) return;
  const std::int64_t before = pl->high_watermark();
  const bool moved = pl->update_follower(follower, offset);
  logger_.event(fmt::format("follower {} replicated {}-{} up to offset {}", follower + 1, tp.topic,
                            tp.partition, offset));
  if (moved) advanced(tp, before, pl->high_watermark());
}

void Replication::advanced(const TopicPartition& tp, std::int64_t from, std::int64_t to) {
  logger_.event(fmt::format("high watermark of {}-{}: {} -> {}", tp.topic, tp.partition, from, to));
  // Kafka's checkAndComplete: only the operations watching this partition are looked at.
  on_advanced_(tp);
}

}  // namespace purgatory::broker
