// Replication: the simulated followers. Each follower has replicated an append `delay` after it
// (a timer task per follower and append), and a partition's high watermark is the smallest offset
// every follower has reached (PartitionLog::update_follower). Each move of a high watermark is an
// event and is handed to `on_advanced`, which wakes the operations waiting on that partition (the
// Broker passes it to the fetch and produce handlers). With no followers the high watermark
// follows the log end at once, and the append itself moved it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "log/log_store.hpp"
#include "protocol/topic_partition.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "requests/logger.hpp"

namespace purgatory::broker {

// Call only from the broker's io thread (the timer runs the followers' catch-up there).
class Replication {
 public:
  using OnAdvanced = std::function<void(const TopicPartition& tp)>;

  // One follower per entry of `delays` (the log has as many). `log`, `timer` and `logger` must
  // outlive it.
  Replication(LogStore& log, std::shared_ptr<SystemTimer> timer,
              std::vector<std::chrono::milliseconds> delays, const Logger& logger,
              OnAdvanced on_advanced);

  // `log` of `tp` was appended to, and its high watermark was `high_watermark_before` before
  // that: tells of the move when the append itself moved it, then schedules each follower's
  // catch-up to the new log end.
  void appended(const TopicPartition& tp, const PartitionLog& log,
                std::int64_t high_watermark_before);

  // How long after an append each follower has replicated it (the live view shows them and sets
  // them; an append already made keeps the delay it was scheduled with).
  [[nodiscard]] const std::vector<std::chrono::milliseconds>& delays() const noexcept {
    return delays_;
  }
  // `follower` counts from 0; it must be < delays().size().
  void set_delay(std::size_t follower, std::chrono::milliseconds delay);

  // Catch-ups still scheduled do nothing from now on (the broker is stopping). Idempotent.
  void stop() noexcept { stopped_ = true; }

 private:
  void caught_up(const TopicPartition& tp, std::size_t follower, std::int64_t offset);
  void advanced(const TopicPartition& tp, std::int64_t from, std::int64_t to);

  LogStore& log_;
  std::shared_ptr<SystemTimer> timer_;
  std::vector<std::chrono::milliseconds> delays_;
  const Logger& logger_;
  OnAdvanced on_advanced_;
  bool stopped_ = false;
};

}  // namespace purgatory::broker
