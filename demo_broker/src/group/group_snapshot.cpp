// GroupCoordinator::snapshot(): the groups, copied on the coordinator's thread, with the join and
// heartbeat purgatories' operations that time them.
#include "group/group_snapshot.hpp"

#include <algorithm>
#include <unordered_map>

#include "group/group_coordinator.hpp"
#include "group_metadata.hpp"
#include "protocol/consumer_protocol.hpp"

namespace purgatory::broker {

namespace {

// The oldest operation listed for each key (each key has at most one: a group has one join
// phase, a member one session).
template <class Key, class Hash>
std::unordered_map<Key, const typename PurgatorySnapshot<Key>::Operation*, Hash> by_key(
    const PurgatorySnapshot<Key>& snap) {
  std::unordered_map<Key, const typename PurgatorySnapshot<Key>::Operation*, Hash> out;
  for (const auto& entry : snap.keys) {
    if (!entry.operations.empty()) out.emplace(entry.key, &entry.operations.front());
  }
  return out;
}

std::optional<std::vector<TopicPartition>> assigned_partitions(const GroupMetadata& group,
                                                               const Bytes& assignment) {
  if (assignment.empty()) return std::vector<TopicPartition>{};
  if (group.protocol_type() != "consumer") return std::nullopt;
  try {
    std::vector<TopicPartition> out;
    for (const AssignedTopic& t : decode_assignment(assignment).topics) {
      for (const std::int32_t p : t.partitions)
        out.push_back({t.topic, p});
    }
    return out;
  } catch (const DecodeError&) {
    return std::nullopt;
  }
}

}  // namespace

GroupCoordinatorSnapshot GroupCoordinator::snapshot(const GroupSnapshotLimits& limits) const {
  GroupCoordinatorSnapshot snap;
  // Nothing runs on this thread in between: the purgatories and the groups agree.
  snap.join = join_purgatory_->snapshot({limits.max_purgatory_keys, 1});
  snap.heartbeat = heartbeat_purgatory_->snapshot({limits.max_purgatory_keys, 1});
  const auto join_ops = by_key<std::string, std::hash<std::string>>(snap.join);
  const auto sessions = by_key<MemberKey, MemberKeyHash>(snap.heartbeat);

  std::vector<const GroupMetadata*> groups;
  groups.reserve(groups_.size());
  for (const auto& [id, group] : groups_)
    groups.push_back(group.get());
  std::sort(groups.begin(), groups.end(), [](const GroupMetadata* a, const GroupMetadata* b) {
    return a->group_id() < b->group_id();
  });
  snap.groups_total = groups.size();
  groups.resize(std::min(groups.size(), limits.max_groups));

  for (const GroupMetadata* group : groups) {
    GroupSnapshot& g = snap.groups.emplace_back();
    g.group_id = group->group_id();
    g.state = group->state();
    g.generation_id = group->generation_id();
    g.protocol_type = group->protocol_type().value_or("");
    g.protocol = group->protocol_name().value_or("");
    g.leader_id = group->leader_id().value_or("");
    g.members_total = group->size();
    g.pending_members = group->pending_members();
    if (group->is(GroupState::preparing_rebalance)) {
      g.initial_join_phase = group->initial_join_phase;
      if (const auto it = join_ops.find(g.group_id); it != join_ops.end()) {
        g.join_phase = *it->second;
      }
    }
    for (const MemberMetadata* m : group->members()) {
      if (m->is_awaiting_join()) ++g.members_rejoined;
      if (g.members.size() >= limits.max_members_per_group) continue;
      GroupMemberSnapshot& s = g.members.emplace_back();
      s.member_id = m->member_id;
      s.client_id = m->client_id;
      s.client_host = m->client_host;
      s.session_timeout_ms = m->session_timeout_ms;
      s.rebalance_timeout_ms = m->rebalance_timeout_ms;
      s.is_leader = group->is_leader(m->member_id);
      s.is_new = m->is_new;
      s.awaiting_join = m->is_awaiting_join();
      s.awaiting_sync = m->is_awaiting_sync();
      s.assigned = assigned_partitions(*group, m->assignment);
      s.assignment_bytes = m->assignment.size();
      if (const auto it = sessions.find(MemberKey{g.group_id, m->member_id});
          it != sessions.end()) {
        s.session = *it->second;
      }
    }
  }
  return snap;
}

}  // namespace purgatory::broker
