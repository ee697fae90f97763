// GroupCoordinatorSnapshot: the consumer groups as they are right now, with the join and heartbeat
// purgatories that time them, for the live view (GroupCoordinator::snapshot()).
//
// Each group comes with its state, generation, protocol and leader, and its members in the order
// they joined: who they are, what they were assigned, whether they have rejoined the join phase
// under way, and the operation that times their session in the heartbeat purgatory (its deadline
// counts down between heartbeats). A rebalancing group comes with the operation that times its
// join phase in the join purgatory: the initial rebalance delay or the rebalance timeout.
// The two purgatory snapshots are the ones those operations were read from, taken in the same
// call on the coordinator's thread, so the groups and the purgatories agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "group/group_coordinator.hpp"
#include "protocol/topic_partition.hpp"
#include "purgatory/purgatory_snapshot.hpp"

namespace purgatory::broker {

// How much a snapshot may hold; the totals are exact whatever the limits. A plain value.
struct GroupSnapshotLimits {
  std::size_t max_groups = 32;             // the first, by group id
  std::size_t max_members_per_group = 32;  // the first to join
  // Keys listed from each purgatory. A member or group beyond it shows no deadline.
  std::size_t max_purgatory_keys = 1024;
};

// Plain values, thread-compatible: serialize them with no lock held.
using JoinPurgatorySnapshot = PurgatorySnapshot<std::string>;
using HeartbeatPurgatorySnapshot = PurgatorySnapshot<MemberKey>;

struct GroupMemberSnapshot {
  std::string member_id;
  std::string client_id;
  std::string client_host;
  std::int32_t session_timeout_ms = 0;
  std::int32_t rebalance_timeout_ms = 0;
  bool is_leader = false;
  // Joined, but no join phase completed since: its session is the new-member join timeout.
  bool is_new = false;
  // Its JoinGroup waits in the join phase under way (it has rejoined); false during a rebalance
  // means the join purgatory is still waiting for it.
  bool awaiting_join = false;
  bool awaiting_sync = false;  // its SyncGroup waits for the leader's assignment
  // The partitions its assignment holds; null when the assignment is not a consumer assignment.
  std::optional<std::vector<TopicPartition>> assigned;
  std::size_t assignment_bytes = 0;
  // Its DelayedHeartbeat, while one waits. None beyond max_purgatory_keys, or when a heartbeat
  // came while its JoinGroup or SyncGroup waits: it counts as alive then, and its next session
  // starts when that phase ends.
  std::optional<HeartbeatPurgatorySnapshot::Operation> session;
};

struct GroupSnapshot {
  std::string group_id;
  GroupState state = GroupState::empty;
  std::int32_t generation_id = 0;
  std::string protocol_type;  // "" until a member joined
  std::string protocol;       // the generation's protocol ("range"); "" when none
  std::string leader_id;      // "" when none
  std::size_t members_total = 0;
  std::size_t members_rejoined = 0;  // members whose JoinGroup waits in the join phase
  // Member ids handed out with MEMBER_ID_REQUIRED and not used yet: a join phase waits for them.
  std::size_t pending_members = 0;
  std::vector<GroupMemberSnapshot> members;  // in join order, at most max_members_per_group
  // While PreparingRebalance: whether the join phase is an InitialDelayedJoin (it ends when the
  // initial rebalance delay passes) rather than a DelayedJoin (every member rejoined, or the
  // rebalance timeout), and that operation (none beyond max_purgatory_keys).
  bool initial_join_phase = false;
  std::optional<JoinPurgatorySnapshot::Operation> join_phase;
};

struct GroupCoordinatorSnapshot {
  std::size_t groups_total = 0;
  std::vector<GroupSnapshot> groups;  // by group id, at most max_groups
  JoinPurgatorySnapshot join;         // its `now` is the time the deadlines count from
  HeartbeatPurgatorySnapshot heartbeat;
};

}  // namespace purgatory::broker
