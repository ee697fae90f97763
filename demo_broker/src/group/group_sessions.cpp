// After the join phase: SyncGroup hands out the leader's assignment; heartbeats keep sessions
// alive in the heartbeat purgatory, whose expiry removes a member; LeaveGroup ends a session at
// once (Kafka's GroupCoordinator.scala).
#include <string>
#include <utility>

#include <fmt/format.h>

#include "delayed_heartbeat.hpp"
#include "group/group_coordinator.hpp"
#include "group_metadata.hpp"

namespace purgatory::broker {

namespace {

using std::chrono::milliseconds;

// What happens to a group once one of its members is removed, for outcome lines (said before the
// removal, whose own consequences are told after).
std::string after_removal(const GroupMetadata& group) {
  if (group.size() <= 1) return fmt::format("{} has no member left", group.group_id());
  if (group.is(GroupState::preparing_rebalance)) {
    return fmt::format("{}'s join phase no longer waits for it", group.group_id());
  }
  return fmt::format("{} rebalances", group.group_id());
}

}  // namespace

// ---- SyncGroup ------------------------------------------------------------------------------

void GroupCoordinator::sync_group(const SyncGroupRequest& req, SyncCallback done) {
  const auto fail = [&](Errc error) { done(sync_error(error), errc_name(error)); };
  if (shut_down_) return fail(Errc::coordinator_not_available);
  if (req.group_id.empty()) return fail(Errc::invalid_group_id);
  const GroupRef group = find_group(req.group_id);
  MemberMetadata* member = group ? group->find(req.member_id) : nullptr;
  if (member == nullptr) return fail(Errc::unknown_member_id);
  if (req.generation_id != group->generation_id()) return fail(Errc::illegal_generation);
  switch (group->state()) {
    case GroupState::empty:
    case GroupState::dead:
      return fail(Errc::unknown_member_id);
    case GroupState::preparing_rebalance:
      return fail(Errc::rebalance_in_progress);
    case GroupState::stable: {
      SyncGroupResponse r;
      r.assignment = member->assignment;
      done(r, "the current generation's assignment");
      complete_and_schedule_next_heartbeat(group, *member);
      return;
    }
    case GroupState::completing_rebalance:
      break;
  }
  group->maybe_invoke_sync_callback(*member, sync_error(Errc::rebalance_in_progress),
                                    "superseded by a newer SyncGroup");
  member->awaiting_sync = std::move(done);
  if (!group->is_leader(member->member_id)) return;  // waits for the leader's assignment
  // The leader's assignment, handed out unread; members it forgot get an empty one, members it
  // invented are ignored.
  for (MemberMetadata* m : group->members()) {
    m->assignment.clear();
    for (const SyncGroupAssignment& a : req.assignments) {
      if (a.member_id == m->member_id) m->assignment = a.assignment;
    }
  }
  set_and_propagate_assignment(group);
  group->transition_to(GroupState::stable);
  event(fmt::format("group {}: generation {} Stable: the leader's assignment went to {} member(s)",
                    group->group_id(), group->generation_id(), group->size()));
}

void GroupCoordinator::set_and_propagate_assignment(const GroupRef& group) {
  for (MemberMetadata* m : group->members()) {
    SyncGroupResponse r;
    r.assignment = m->assignment;
    if (group->maybe_invoke_sync_callback(*m, r, "the leader's assignment")) {
      // Its session restarts now: an expiry while it waited for the leader was ignored.
      complete_and_schedule_next_heartbeat(group, *m);
    }
  }
}

void GroupCoordinator::reset_and_propagate_assignment_error(const GroupRef& group, Errc error) {
  for (MemberMetadata* m : group->members()) {
    m->assignment.clear();
    if (group->maybe_invoke_sync_callback(*m, sync_error(error), "the group rebalances again")) {
      complete_and_schedule_next_heartbeat(group, *m);
    }
  }
}

// ---- Heartbeat and LeaveGroup -----------------------------------------------------------------

Errc GroupCoordinator::heartbeat(const HeartbeatRequest& req) {
  if (shut_down_) return Errc::coordinator_not_available;
  if (req.group_id.empty()) return Errc::invalid_group_id;
  const GroupRef group = find_group(req.group_id);
  MemberMetadata* member = group ? group->find(req.member_id) : nullptr;
  if (member == nullptr) return Errc::unknown_member_id;
  if (req.generation_id != group->generation_id()) return Errc::illegal_generation;
  switch (group->state()) {
    case GroupState::empty:
    case GroupState::dead:
      return Errc::unknown_member_id;
    case GroupState::completing_rebalance:
    case GroupState::stable:
      complete_and_schedule_next_heartbeat(group, *member);
      return Errc::none;
    case GroupState::preparing_rebalance:
      complete_and_schedule_next_heartbeat(group, *member);
      return Errc::rebalance_in_progress;
  }
  return Errc::unknown_member_id;
}

Errc GroupCoordinator::leave_group(const LeaveGroupRequest& req) {
  if (shut_down_) return Errc::coordinator_not_available;
  if (req.group_id.empty()) return Errc::invalid_group_id;
  const GroupRef group = find_group(req.group_id);
  if (!group) return Errc::unknown_member_id;
  if (group->is_pending_member(req.member_id)) {
    remove_pending_member_and_update_group(group, req.member_id);
    return Errc::none;
  }
  MemberMetadata* member = group->find(req.member_id);
  if (member == nullptr) return Errc::unknown_member_id;
  counters_.members_left.fetch_add(1);
  event(fmt::format("group {}: member {} left (LeaveGroup)", group->group_id(), req.member_id));
  const Nanos waited = now() - member->session_started;
  const std::string then = after_removal(*group);
  if (remove_heartbeat_for_leaving_member(group, *member)) {
    outcome("heartbeat", to_string(MemberKey{group->group_id(), req.member_id}), "completed",
            waited, "LeaveGroup",
            fmt::format("member {} of {} left (LeaveGroup): the heartbeat purgatory completed "
                        "its session after {}; {}",
                        req.member_id, group->group_id(), plain_duration(waited), then));
  }
  remove_member_and_update_group(group, req.member_id,
                                 fmt::format("member {} left", req.member_id));
  return Errc::none;
}

// ---- sessions ---------------------------------------------------------------------------------

void GroupCoordinator::complete_and_schedule_next_heartbeat(const GroupRef& group,
                                                            MemberMetadata& member) {
  complete_and_schedule_next_expiration(group, member, milliseconds(member.session_timeout_ms));
}

void GroupCoordinator::complete_and_schedule_next_expiration(const GroupRef& group,
                                                             MemberMetadata& member,
                                                             milliseconds timeout) {
  const MemberKey key{group->group_id(), member.member_id};
  member.session_started = now();
  member.heartbeat_satisfied = true;
  heartbeat_purgatory_->check_and_complete(key);  // the previous session operation completes
  member.heartbeat_satisfied = false;
  heartbeat_purgatory_->try_complete_else_watch(
      make_operation<DelayedHeartbeat>(*this, group, member.member_id, false, timeout), {key});
}

void GroupCoordinator::add_pending_member_expiration(const GroupRef& group,
                                                     const std::string& member_id,
                                                     milliseconds timeout) {
  heartbeat_purgatory_->try_complete_else_watch(
      make_operation<DelayedHeartbeat>(*this, group, member_id, true, timeout),
      {MemberKey{group->group_id(), member_id}});
}

bool GroupCoordinator::remove_heartbeat_for_leaving_member(const GroupRef& group,
                                                           MemberMetadata& member) {
  member.is_leaving = true;
  return heartbeat_purgatory_->check_and_complete(MemberKey{group->group_id(), member.member_id}) >
         0;
}

bool GroupCoordinator::can_complete_heartbeat(const GroupMetadata& group,
                                              const std::string& member_id, bool is_pending) const {
  if (group.is(GroupState::dead)) return true;
  if (is_pending) return group.has(member_id);  // it joined with its id
  const MemberMetadata* member = group.find(member_id);
  return member == nullptr || member->has_satisfied_heartbeat() || member->is_leaving;
}

void GroupCoordinator::on_expire_heartbeat(const GroupRef& group, const std::string& member_id,
                                           bool is_pending, Nanos timeout) {
  if (shut_down_ || group->is(GroupState::dead)) return;
  const std::string& id = group->group_id();
  const auto expired = [&](Nanos waited, std::string why, std::string text) {
    outcome("heartbeat", to_string(MemberKey{id, member_id}), "expired", waited, std::move(why),
            std::move(text));
  };
  if (is_pending) {
    if (!group->is_pending_member(member_id)) return;
    counters_.pending_members_expired.fetch_add(1);
    event(
        fmt::format("group {}: member id {} (MEMBER_ID_REQUIRED) was never used to join: "
                    "forgotten",
                    id, member_id));
    expired(timeout, "member id never used",
            fmt::format("member id {} of {} (MEMBER_ID_REQUIRED) expired by the heartbeat "
                        "purgatory after {} unused: forgotten",
                        member_id, id, plain_duration(timeout)));
    remove_pending_member_and_update_group(group, member_id);
    return;
  }
  const MemberMetadata* member = group->find(member_id);
  if (member == nullptr) return;
  const Nanos waited = now() - member->session_started;
  if (member->has_satisfied_heartbeat()) {
    // Its JoinGroup or SyncGroup waits: alive by definition, that phase has its own timeout.
    expired(waited, "alive: it waits in a join or sync phase",
            fmt::format("the session of member {} of {} ran out after {} while it waits in a "
                        "join or sync phase: it counts as alive and stays",
                        member_id, id, plain_duration(waited)));
    return;
  }
  counters_.sessions_expired.fetch_add(1);
  if (member->is_new) {
    event(
        fmt::format("group {}: new member {} saw no join phase through within {} ms: expired "
                    "by the heartbeat purgatory, removed",
                    id, member_id, config_.new_member_join_timeout.count()));
    expired(waited, "new member: no join phase completed in time",
            fmt::format("new member {} of {} expired by the heartbeat purgatory: no join phase "
                        "completed within {} of its JoinGroup; {}",
                        member_id, id, plain_duration(waited), after_removal(*group)));
  } else {
    event(
        fmt::format("group {}: member {} sent no heartbeat within its session timeout ({} ms): "
                    "expired by the heartbeat purgatory, removed",
                    id, member_id, member->session_timeout_ms));
    expired(waited,
            fmt::format("no heartbeat within its {} ms session", member->session_timeout_ms),
            fmt::format("member {} of {} expired by the heartbeat purgatory after {} without a "
                        "heartbeat; {}",
                        member_id, id, plain_duration(waited), after_removal(*group)));
  }
  remove_member_and_update_group(group, member_id,
                                 fmt::format("member {} session expired", member_id));
}

}  // namespace purgatory::broker
