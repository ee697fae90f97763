// LiveState: everything the live view's page shows, gathered by the Broker on its io thread (one
// bounded snapshot of each purgatory, of the timer's wheel and of the consumer groups) and turned
// into the JSON of GET /api/state (docs/live-view.md) with no lock of any purgatory or timer
// held.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "group/group_snapshot.hpp"
#include "log/producer_state.hpp"
#include "observability/broker_metrics.hpp"
#include "protocol/topic_partition.hpp"
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

// An in-process member started from the page (InProcessMember), as the page lists it.
struct LiveMember {
  std::string name;  // its client id: "live-view-1"
  std::string group_id;
  std::string topic;
  std::string member_id;   // "" until it has one
  std::string_view phase;  // to_string(InProcessMember::Phase)
  bool frozen = false;
  std::int32_t generation_id = -1;
  std::vector<TopicPartition> assigned;
  std::uint64_t heartbeats = 0;
  std::string error;
  std::int64_t session_timeout_ms = 0;
  std::int64_t heartbeat_interval_ms = 0;
};

struct LivePartition {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t log_start = 0;
  std::int64_t log_end = 0;
  std::int64_t high_watermark = 0;
  std::vector<std::int64_t> follower_offsets;
};

// An idempotent producer as one partition remembers it.
struct LiveProducer {
  std::string topic;
  std::int32_t partition = 0;
  ProducerSnapshot producer;
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
  PurgatoryMetrics join;
  PurgatoryMetrics heartbeat;
  // The groups, with the join and heartbeat purgatories' snapshots.
  GroupCoordinatorSnapshot groups;
  std::vector<LiveMember> in_process_members;
  WheelSnapshot wheel;
  int wheel_size = 0;
  std::vector<LivePartition> partitions;  // at most kMaxPartitions
  std::size_t partitions_total = 0;
  IdempotenceStats idempotence;
  std::vector<LiveProducer> producers;  // at most kMaxProducers, kProducersPerPartition each
  std::vector<OutcomeEvent> outcomes;   // those after the poller's `since`, oldest first
  std::uint64_t last_outcome_seq = 0;

  static constexpr std::size_t kMaxPartitions = 64;
  static constexpr std::size_t kMaxProducers = 32;
  static constexpr std::size_t kProducersPerPartition = 4;  // those that appended last
  // Keys each purgatory lists (the join and heartbeat ones: those due soonest).
  static constexpr std::size_t kMaxKeys = 32;
};

// Pure: the JSON of GET /api/state (see docs/live-view.md for its shape). Thread-compatible.
[[nodiscard]] std::string to_json(const LiveState& state);

class JsonWriter;
// Part of to_json() (live_state_groups_json.cpp): "groups_total", "groups" and
// "in_process_members".
void groups_json(JsonWriter& j, const LiveState& state);
// Milliseconds, as /api/state writes times.
[[nodiscard]] inline double ms(Nanos n) {
  return std::chrono::duration<double, std::milli>(n).count();
}
// An operation's "age_ms", "remaining_ms" and "timeout_ms", relative to `now`, in the open object.
void operation_times_json(JsonWriter& j, Nanos now, Nanos watched_since, Nanos deadline,
                          Nanos timeout);

// The live view's page (demo_broker/ui/index.html, compiled in by CMake): HTML, CSS and JS in one
// document that fetches nothing but /api/state and the controls.
[[nodiscard]] std::string_view live_view_page() noexcept;

}  // namespace purgatory::broker
