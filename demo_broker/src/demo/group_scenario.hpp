// The demo's consumer-group scenario: two consumers join one group (the first waits in the join
// purgatory for the second through the initial rebalance delay), split the partitions, one stops
// heartbeating and is expired by the heartbeat purgatory, and the other takes every partition
// and resumes where the first committed.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace purgatory::broker {

// Where the scenario writes: a timeline line (who, what), a plain line, and a checked verdict.
// A plain value, thread-compatible; called on the scenario's thread.
struct ScenarioOutput {
  std::function<void(std::string_view who, std::string_view what)> at;
  std::function<void(std::string_view text)> say;
  std::function<void(bool ok, std::string_view what)> check;
};

// The timing the broker must be configured with (BrokerConfig::groups), and the scenario uses.
// A plain value, thread-compatible.
// The second member joins a third of the way into the first one's initial delay, and heartbeats
// come 6 per session: room for a slow (sanitized, shared) machine.
struct GroupScenarioTiming {
  std::int32_t initial_rebalance_delay_ms = 400;
  std::int32_t session_timeout_ms = 1500;
  std::int32_t heartbeat_interval_ms = 250;
};

// Runs against a broker on 127.0.0.1:`port` whose topics have 4 partitions, on the calling
// thread (its clients block). Throws ClientError when the broker does not answer; every other
// surprise is a failed check.
void run_group_scenario(std::uint16_t port, const GroupScenarioTiming& timing,
                        const ScenarioOutput& out);

}  // namespace purgatory::broker
