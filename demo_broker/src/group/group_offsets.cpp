// Committed offsets (OffsetCommit, OffsetFetch) and the tools' view of the groups (ListGroups,
// DescribeGroups), after Kafka's GroupCoordinator.scala and GroupMetadataManager.scala.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "group/group_coordinator.hpp"
#include "group_metadata.hpp"

namespace purgatory::broker {

namespace {

// Kafka's validateOffsetCommit: a commit naming a generation or a member must come from a
// member of the current generation; one naming neither (a consumer using assign()) may commit
// only to a group nobody has joined.
Errc validate_offset_commit(const GroupMetadata& group, std::int32_t generation_id,
                            const std::string& member_id) {
  if (generation_id >= 0 || !member_id.empty()) {
    if (!group.has(member_id)) return Errc::unknown_member_id;
    if (generation_id != group.generation_id()) return Errc::illegal_generation;
    return Errc::none;
  }
  return group.is(GroupState::empty) ? Errc::none : Errc::unknown_member_id;
}

}  // namespace

bool GroupCoordinator::partition_exists(const std::string& topic, std::int32_t partition) const {
  return !hooks_.partition_exists || hooks_.partition_exists(topic, partition);
}

OffsetCommitResponse GroupCoordinator::commit_offsets(const OffsetCommitRequest& req) {
  Errc group_error = Errc::none;
  GroupRef group;
  if (shut_down_) {
    group_error = Errc::coordinator_not_available;
  } else {
    group = find_group(req.group_id);
    if (!group && req.generation_id < 0) {
      group = get_or_create_group(req.group_id);  // offsets without group management
    }
    if (!group) {
      // A generation for a group that does not exist: from a generation long gone.
      group_error = Errc::illegal_generation;
    } else {
      group_error = validate_offset_commit(*group, req.generation_id, req.member_id);
    }
  }
  MemberMetadata* member = group ? group->find(req.member_id) : nullptr;
  if (group_error == Errc::none && group->is(GroupState::completing_rebalance)) {
    // The member has its new generation but not yet its assignment: what would it commit?
    group_error = Errc::rebalance_in_progress;
  }
  if (group_error == Errc::none && member != nullptr) {
    // A commit during PreparingRebalance is still accepted: the member learns of the rebalance
    // from its next heartbeat. Either way it is alive.
    complete_and_schedule_next_heartbeat(group, *member);
  }

  OffsetCommitResponse resp;
  for (const OffsetCommitTopic& t : req.topics) {
    OffsetCommitTopicResponse& tr = resp.topics.emplace_back();
    tr.name = t.name;
    for (const OffsetCommitPartition& p : t.partitions) {
      OffsetCommitPartitionResponse& pr = tr.partitions.emplace_back();
      pr.partition_index = p.partition_index;
      if (!partition_exists(t.name, p.partition_index)) {
        pr.error_code = Errc::unknown_topic_or_partition;
      } else if (group_error != Errc::none) {
        pr.error_code = group_error;
      } else if (p.committed_metadata &&
                 p.committed_metadata->size() > config_.max_offset_metadata_bytes) {
        pr.error_code = Errc::offset_metadata_too_large;
      } else {
        group->offsets().commit(TopicPartition{t.name, p.partition_index},
                                CommittedOffset{p.committed_offset, p.committed_leader_epoch,
                                                p.committed_metadata.value_or("")});
        counters_.offsets_committed.fetch_add(1);
      }
    }
  }
  if (group) maybe_remove_group(group);  // created for a commit that stored nothing
  return resp;
}

OffsetFetchResponse GroupCoordinator::fetch_offsets(const OffsetFetchRequest& req) const {
  OffsetFetchResponse resp;
  const GroupRef group = shut_down_ ? nullptr : find_group(req.group_id);
  const Errc error = shut_down_ ? Errc::coordinator_not_available : Errc::none;
  resp.error_code = error;
  const auto answer = [&](const TopicPartition& tp) {
    OffsetFetchPartitionResponse p;
    p.partition_index = tp.partition;
    p.metadata = "";  // Kafka's NO_METADATA
    p.error_code = error;
    if (group) {
      if (const auto committed = group->offsets().get(tp)) {
        p.committed_offset = committed->offset;
        p.committed_leader_epoch = committed->leader_epoch;
        p.metadata = committed->metadata;
      }
    }
    return p;
  };
  if (req.topics) {
    for (const OffsetFetchTopic& t : *req.topics) {
      OffsetFetchTopicResponse& tr = resp.topics.emplace_back();
      tr.name = t.name;
      for (const std::int32_t partition : t.partition_indexes)
        tr.partitions.push_back(answer(TopicPartition{t.name, partition}));
    }
  } else if (group) {
    // v2+: every partition the group committed, by topic.
    for (const auto& [tp, committed] : group->offsets().all()) {
      if (resp.topics.empty() || resp.topics.back().name != tp.topic) {
        resp.topics.emplace_back().name = tp.topic;
      }
      resp.topics.back().partitions.push_back(answer(tp));
    }
  }
  return resp;
}

ListGroupsResponse GroupCoordinator::list_groups() const {
  ListGroupsResponse resp;
  if (shut_down_) {
    resp.error_code = Errc::coordinator_not_available;
    return resp;
  }
  for (const auto& [id, group] : groups_)
    resp.groups.push_back({id, group->protocol_type().value_or("")});
  std::sort(resp.groups.begin(), resp.groups.end(),
            [](const ListedGroup& a, const ListedGroup& b) { return a.group_id < b.group_id; });
  return resp;
}

DescribeGroupsResponse GroupCoordinator::describe_groups(const DescribeGroupsRequest& req) const {
  DescribeGroupsResponse resp;
  for (const std::string& id : req.groups) {
    DescribedGroup& d = resp.groups.emplace_back();
    d.group_id = id;
    const GroupRef group = shut_down_ ? nullptr : find_group(id);
    if (!group) {
      d.error_code = shut_down_ ? Errc::coordinator_not_available : Errc::none;
      d.group_state = to_string(GroupState::dead);
      continue;
    }
    d.group_state = to_string(group->state());
    d.protocol_type = group->protocol_type().value_or("");
    // As Kafka: the protocol, metadata and assignments only once they are settled.
    const bool stable = group->is(GroupState::stable);
    if (stable) d.protocol_data = group->protocol_name().value_or("");
    for (const MemberMetadata* m : group->members()) {
      DescribedGroupMember& dm = d.members.emplace_back();
      dm.member_id = m->member_id;
      dm.client_id = m->client_id;
      dm.client_host = m->client_host;
      if (stable) {
        if (const Bytes* metadata = m->metadata(d.protocol_data)) dm.member_metadata = *metadata;
        dm.member_assignment = m->assignment;
      }
    }
  }
  return resp;
}

}  // namespace purgatory::broker
