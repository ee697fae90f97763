// GET /api/state, the consumer groups' part: the groups with their members' sessions and join
// phases, and the page's in-process members. The shape is documented in docs/live-view.md and
// checked by tests/demo_broker/e2e/live_view_e2e.py; change both together.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "observability/json_writer.hpp"
#include "observability/live_state.hpp"

namespace purgatory::broker {

namespace {

void session_json(JsonWriter& j, Nanos now,
                  const std::optional<HeartbeatPurgatorySnapshot::Operation>& op) {
  if (!op) {
    j.null("session");
    return;
  }
  j.begin_object("session");
  operation_times_json(j, now, op->watched_since, op->deadline, op->timeout);
  j.end_object();
}

void partitions_json(JsonWriter& j, std::string_view key, const std::vector<TopicPartition>& tps) {
  j.begin_array(key);
  for (const TopicPartition& tp : tps)
    j.str(fmt::format("{}-{}", tp.topic, tp.partition));
  j.end_array();
}

void optional_str(JsonWriter& j, std::string_view key, const std::string& value) {
  if (value.empty()) {
    j.null(key);
  } else {
    j.str(key, value);
  }
}

void group_json(JsonWriter& j, const LiveState& s, const GroupSnapshot& g) {
  j.begin_object();
  j.str("group", g.group_id).str("state", to_string(g.state));
  j.num("generation", g.generation_id);
  optional_str(j, "protocol_type", g.protocol_type);
  optional_str(j, "protocol", g.protocol);
  optional_str(j, "leader", g.leader_id);
  j.num("members_total", g.members_total).num("pending_members", g.pending_members);
  if (g.state != GroupState::preparing_rebalance) {
    j.null("join_phase");
  } else {
    j.begin_object("join_phase");
    j.str("ends_at", g.initial_join_phase ? "initial delay" : "rebalance timeout");
    j.num("rejoined", g.members_rejoined);
    j.num("awaited", g.members_total - std::min(g.members_total, g.members_rejoined));
    if (const auto& op = g.join_phase) {
      operation_times_json(j, s.groups.join.now, op->watched_since, op->deadline, op->timeout);
    } else {
      j.null("age_ms").null("remaining_ms").null("timeout_ms");
    }
    j.end_object();
  }
  j.begin_array("members");
  for (const GroupMemberSnapshot& m : g.members) {
    j.begin_object();
    j.str("member_id", m.member_id).str("client_id", m.client_id);
    j.str("client_host", m.client_host);
    j.num("session_timeout_ms", m.session_timeout_ms);
    j.num("rebalance_timeout_ms", m.rebalance_timeout_ms);
    j.boolean("leader", m.is_leader).boolean("new", m.is_new);
    j.boolean("rejoined", m.awaiting_join).boolean("awaiting_sync", m.awaiting_sync);
    if (m.assigned) {
      partitions_json(j, "assigned", *m.assigned);
    } else {
      j.null("assigned");
    }
    j.num("assignment_bytes", m.assignment_bytes);
    session_json(j, s.groups.heartbeat.now, m.session);
    const auto in_process = std::find_if(
        s.in_process_members.begin(), s.in_process_members.end(), [&](const LiveMember& lm) {
          return lm.group_id == g.group_id && lm.member_id == m.member_id;
        });
    optional_str(j, "in_process", in_process == s.in_process_members.end() ? "" : in_process->name);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

}  // namespace

void groups_json(JsonWriter& j, const LiveState& s) {
  j.num("groups_total", s.groups.groups_total);
  j.begin_array("groups");
  for (const GroupSnapshot& g : s.groups.groups)
    group_json(j, s, g);
  j.end_array();
  j.begin_array("in_process_members");
  for (const LiveMember& m : s.in_process_members) {
    j.begin_object();
    j.str("name", m.name).str("group", m.group_id).str("topic", m.topic);
    optional_str(j, "member_id", m.member_id);
    j.str("phase", m.phase).boolean("frozen", m.frozen);
    j.num("generation", m.generation_id);
    partitions_json(j, "assigned", m.assigned);
    j.num("heartbeats", m.heartbeats);
    optional_str(j, "error", m.error);
    j.num("session_timeout_ms", m.session_timeout_ms);
    j.num("heartbeat_interval_ms", m.heartbeat_interval_ms);
    j.end_object();
  }
  j.end_array();
}

}  // namespace purgatory::broker
