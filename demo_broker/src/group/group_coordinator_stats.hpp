// GroupCoordinatorStats: what the group coordinator counts (GroupCoordinator::stats()), kept apart
// from group_coordinator.hpp so that BrokerMetrics carries it without the coordinator's headers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace purgatory::broker {

// Outcome counters (monotonic) and two gauges. A plain value, thread-compatible.
struct GroupCoordinatorStats {
  std::uint64_t rebalances = 0;               // join phases begun (-> PreparingRebalance)
  std::uint64_t joins_completed = 0;          // join phases ended with every member in
  std::uint64_t joins_expired = 0;            // join phases ended by the rebalance timeout
  std::uint64_t initial_joins = 0;            // empty groups' join phases ended by their delay
  std::uint64_t initial_delays_extended = 0;  // initial delays restarted for a new member
  std::uint64_t generations = 0;              // generations started (-> CompletingRebalance)
  std::uint64_t members_evicted = 0;          // not rejoined when a join phase ended
  std::uint64_t sessions_expired = 0;         // removed by the heartbeat purgatory
  std::uint64_t pending_members_expired = 0;  // given an id (MEMBER_ID_REQUIRED), never came
  std::uint64_t members_left = 0;             // LeaveGroup
  std::uint64_t offsets_committed = 0;        // partitions
  std::size_t groups = 0;                     // gauge: groups known now
  std::size_t members = 0;                    // gauge: members of all groups now
};

}  // namespace purgatory::broker
