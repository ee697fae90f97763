// LiveState: everything the live view's page shows, gathered by the Broker on its io thread (one
// bounded snapshot of each purgatory and of the timer's wheel) and turned into the JSON of
// GET /api/state (docs/live-view.md) with no lock of any purgatory or timer held.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "purgatory/broker/topic_partition.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "purgatory/purgatory_snapshot.hpp"
#include "purgatory/timer/wheel_snapshot.hpp"
#include "requests/outcome_log.hpp"

namespace purgatory::broker {

// Plain values, thread-compatible.
struct LivePurgatory {
  PurgatoryMetrics metrics;
  PurgatorySnapshot<TopicPartition> snapshot;
};

struct LivePartition {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t log_start = 0;
  std::int64_t log_end = 0;
  std::int64_t high_watermark = 0;
  std::vector<std::int64_t> follower_offsets;
};

struct LiveState {
  std::chrono::steady_clock::time_point taken;    // when gathered
  std::chrono::steady_clock::time_point started;  // the broker's start (times are relative to it)
  std::uint16_t kafka_port = 0;
  std::int32_t node_id = 0;
  std::vector<std::int64_t> replication_delays_ms;  // one per simulated follower
  std::uint64_t connections_open = 0;
  std::uint64_t requests = 0;
  bool demo_running = false;
  LivePurgatory fetch;
  LivePurgatory produce;
  WheelSnapshot wheel;
  int wheel_size = 0;
  std::vector<LivePartition> partitions;  // at most kMaxPartitions
  std::size_t partitions_total = 0;
  std::vector<OutcomeEvent> outcomes;  // those after the poller's `since`, oldest first
  std::uint64_t last_outcome_seq = 0;

  static constexpr std::size_t kMaxPartitions = 64;
};

// Pure: the JSON of GET /api/state (see docs/live-view.md for its shape). Thread-compatible.
[[nodiscard]] std::string to_json(const LiveState& state);

// The live view's page (demo_broker/ui/index.html, compiled in by CMake): HTML, CSS and JS in one
// document that fetches nothing but /api/state and the controls.
[[nodiscard]] std::string_view live_view_page() noexcept;

}  // namespace purgatory::broker
