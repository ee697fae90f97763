// JoinGroup and the join phase: rebalances, the join purgatory's DelayedJoin and
// InitialDelayedJoin, and the next generation (Kafka's GroupCoordinator.scala).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "delayed_join.hpp"
#include "group/group_coordinator.hpp"
#include "group_metadata.hpp"

namespace purgatory::broker {

namespace {
using std::chrono::milliseconds;
}  // namespace

void GroupCoordinator::join_group(const JoinGroupRequest& req, const JoinContext& ctx,
                                  JoinCallback done) {
  const auto fail = [&](Errc error) { done(join_error(error, req.member_id), errc_name(error)); };
  if (shut_down_) return fail(Errc::coordinator_not_available);
  if (req.group_id.empty()) return fail(Errc::invalid_group_id);
  const milliseconds session(req.session_timeout_ms);
  if (session < config_.min_session_timeout || session > config_.max_session_timeout) {
    return fail(Errc::invalid_session_timeout);
  }
  const std::int32_t rebalance_timeout_ms =
      req.rebalance_timeout_ms < 0 ? req.session_timeout_ms : req.rebalance_timeout_ms;
  const bool is_unknown = req.member_id.empty();
  GroupRef group = find_group(req.group_id);
  if (!group) {
    if (!is_unknown) return fail(Errc::unknown_member_id);
    group = get_or_create_group(req.group_id);
  }
  if (is_unknown) {
    do_new_member_join(group, req, rebalance_timeout_ms, ctx, done);
  } else {
    do_current_member_join(group, req, rebalance_timeout_ms, ctx, done);
  }
  // This join may have been the last one the join phase waited for.
  if (group->is(GroupState::preparing_rebalance)) {
    join_purgatory_->check_and_complete(group->group_id());
  }
  maybe_remove_group(group);  // created for a join that was refused
}

void GroupCoordinator::do_new_member_join(const GroupRef& group, const JoinGroupRequest& req,
                                          std::int32_t rebalance_timeout_ms, const JoinContext& ctx,
                                          JoinCallback& done) {
  if (!group->supports_protocols(req.protocol_type, req.protocols)) {
    done(join_error(Errc::inconsistent_group_protocol, req.member_id),
         fmt::format("INCONSISTENT_GROUP_PROTOCOL: protocol type '{}' with {} protocol(s) "
                     "matches nothing every member of {} supports",
                     req.protocol_type, req.protocols.size(), group->group_id()));
    return;
  }
  const std::string member_id = new_member_id(ctx.client_id);
  if (ctx.require_known_member_id) {
    // KIP-394: the member learns its id first and joins again with it, so a client that loses
    // this answer leaves no ghost member behind, only a pending id that expires.
    group->add_pending_member(member_id);
    add_pending_member_expiration(group, member_id, milliseconds(req.session_timeout_ms));
    done(join_error(Errc::member_id_required, member_id),
         "MEMBER_ID_REQUIRED: join again with the member id given");
    return;
  }
  add_member_and_rebalance(group, member_id, req, rebalance_timeout_ms, ctx, std::move(done));
}

void GroupCoordinator::do_current_member_join(const GroupRef& group, const JoinGroupRequest& req,
                                              std::int32_t rebalance_timeout_ms,
                                              const JoinContext& ctx, JoinCallback& done) {
  if (!group->supports_protocols(req.protocol_type, req.protocols)) {
    done(join_error(Errc::inconsistent_group_protocol, req.member_id),
         "INCONSISTENT_GROUP_PROTOCOL");
    return;
  }
  if (group->is_pending_member(req.member_id)) {
    add_member_and_rebalance(group, req.member_id, req, rebalance_timeout_ms, ctx, std::move(done));
    return;
  }
  MemberMetadata* member = group->find(req.member_id);
  if (member == nullptr) {
    done(join_error(Errc::unknown_member_id, req.member_id), "UNKNOWN_MEMBER_ID");
    return;
  }
  // The answer for a member rejoining a generation that already started, unchanged.
  const auto current_generation = [&](bool with_members) {
    JoinGroupResponse r;
    r.generation_id = group->generation_id();
    r.protocol_name = group->protocol_name().value_or("");
    r.leader = group->leader_id().value_or("");
    r.member_id = member->member_id;
    if (with_members) r.members = group->current_member_metadata();
    done(r, "rejoined unchanged: the current generation");
  };
  switch (group->state()) {
    case GroupState::preparing_rebalance:
      update_member_and_rebalance(group, *member, req, rebalance_timeout_ms, std::move(done),
                                  "member rejoined");
      break;
    case GroupState::completing_rebalance:
      if (member->matches(req.protocols)) {
        current_generation(group->is_leader(member->member_id));
      } else {
        update_member_and_rebalance(group, *member, req, rebalance_timeout_ms, std::move(done),
                                    fmt::format("member {} changed its protocols", req.member_id));
      }
      break;
    case GroupState::stable:
      if (group->is_leader(member->member_id)) {
        // The leader may rejoin to rebalance for reasons the metadata does not show (a topic
        // gained partitions): Kafka always starts a rebalance for it.
        update_member_and_rebalance(group, *member, req, rebalance_timeout_ms, std::move(done),
                                    fmt::format("leader {} rejoined", req.member_id));
      } else if (!member->matches(req.protocols)) {
        update_member_and_rebalance(group, *member, req, rebalance_timeout_ms, std::move(done),
                                    fmt::format("member {} changed its protocols", req.member_id));
      } else {
        current_generation(false);
      }
      break;
    case GroupState::empty:
    case GroupState::dead:
      done(join_error(Errc::unknown_member_id, req.member_id), "UNKNOWN_MEMBER_ID");
      break;
  }
}

void GroupCoordinator::add_member_and_rebalance(const GroupRef& group, const std::string& member_id,
                                                const JoinGroupRequest& req,
                                                std::int32_t rebalance_timeout_ms,
                                                const JoinContext& ctx, JoinCallback done) {
  MemberMetadata m;
  m.member_id = member_id;
  m.client_id = ctx.client_id;
  m.client_host = ctx.client_host;
  m.rebalance_timeout_ms = rebalance_timeout_ms;
  m.session_timeout_ms = req.session_timeout_ms;
  m.protocol_type = req.protocol_type;
  m.protocols = req.protocols;
  m.join_order = next_join_order_++;
  m.is_new = true;
  if (group->is(GroupState::preparing_rebalance) && group->generation_id() == 0) {
    group->new_member_added = true;  // the initial delay waits once more for the likes of it
  }
  MemberMetadata& member = group->add(std::move(m), std::move(done));
  counters_.members.fetch_add(1);
  event(fmt::format("group {}: member {} joined", group->group_id(), member_id));
  // A new member has no session yet (it cannot heartbeat before it has a generation), so it is
  // only given new_member_join_timeout to see a join phase through.
  complete_and_schedule_next_expiration(group, member, config_.new_member_join_timeout);
  maybe_prepare_rebalance(group, fmt::format("member {} joined", member_id));
}

void GroupCoordinator::update_member_and_rebalance(const GroupRef& group, MemberMetadata& member,
                                                   const JoinGroupRequest& req,
                                                   std::int32_t rebalance_timeout_ms,
                                                   JoinCallback done, std::string_view reason) {
  group->update_member(member, req.protocols, rebalance_timeout_ms, req.session_timeout_ms,
                       std::move(done));
  maybe_prepare_rebalance(group, reason);
}

void GroupCoordinator::maybe_prepare_rebalance(const GroupRef& group, std::string_view reason) {
  if (group->can_rebalance()) prepare_rebalance(group, reason);
}

void GroupCoordinator::prepare_rebalance(const GroupRef& group, std::string_view reason) {
  // Members waiting for the old generation's assignment join again instead.
  if (group->is(GroupState::completing_rebalance)) {
    reset_and_propagate_assignment_error(group, Errc::rebalance_in_progress);
  }
  OperationRef op;
  std::string waits;
  if (group->is(GroupState::empty)) {
    const auto delay = static_cast<std::int32_t>(config_.initial_rebalance_delay.count());
    const std::int32_t remaining = std::max(group->rebalance_timeout_ms() - delay, 0);
    op = make_operation<InitialDelayedJoin>(*this, group, delay, remaining);
    waits = fmt::format("the initial rebalance delay, {} ms", delay);
  } else {
    op = make_operation<DelayedJoin>(*this, group, group->rebalance_timeout_ms());
    waits = group->size() == 0 ? std::string("no member: nobody is left to wait for")
                               : fmt::format("{} member(s) to rejoin, up to {} ms", group->size(),
                                             group->rebalance_timeout_ms());
  }
  group->initial_join_phase = group->is(GroupState::empty);
  group->join_phase_started = now();
  group->transition_to(GroupState::preparing_rebalance);
  counters_.rebalances.fetch_add(1);
  event(fmt::format("group {}: PreparingRebalance ({}); the join purgatory waits for {}",
                    group->group_id(), reason, waits));
  join_purgatory_->try_complete_else_watch(op, {group->group_id()});
}

bool GroupCoordinator::can_complete_join(const GroupMetadata& group) const {
  return group.is(GroupState::dead) || group.has_all_members_joined();
}

bool GroupCoordinator::maybe_extend_initial_delay(const GroupRef& group, std::int32_t remaining_ms,
                                                  std::int32_t delay_ms) {
  if (group->is(GroupState::dead) || !group->new_member_added || remaining_ms == 0) return false;
  group->new_member_added = false;
  const std::int32_t delay =
      std::min(static_cast<std::int32_t>(config_.initial_rebalance_delay.count()), remaining_ms);
  const std::int32_t remaining = std::max(remaining_ms - delay_ms, 0);
  counters_.initial_delays_extended.fetch_add(1);
  event(fmt::format(
      "group {}: initial rebalance delay over, but a member joined meanwhile: waiting {} ms more",
      group->group_id(), delay));
  const Nanos at = now();
  outcome("join", group->group_id(), "delay over", at - group->join_phase_started,
          "a member joined meanwhile: the delay restarts",
          fmt::format("initial rebalance delay of {} over after {}, but a member joined meanwhile: "
                      "the join purgatory waits {} more",
                      group->group_id(), plain_duration(at - group->join_phase_started),
                      plain_duration(milliseconds(delay))));
  group->join_phase_started = at;
  join_purgatory_->try_complete_else_watch(
      make_operation<InitialDelayedJoin>(*this, group, delay, remaining), {group->group_id()});
  return true;
}

void GroupCoordinator::on_complete_join(const GroupRef& group, JoinEnd end, std::string_view how) {
  if (group->is(GroupState::dead)) return;
  const std::vector<std::string> evicted = group->not_yet_rejoined_members();
  for (const std::string& id : evicted) {
    counters_.members_evicted.fetch_add(1);
    event(fmt::format("group {}: member {} did not rejoin before the join phase ended: evicted",
                      group->group_id(), id));
    remove_member(group, id);
    heartbeat_purgatory_->check_and_complete(MemberKey{group->group_id(), id});
  }
  switch (end) {
    case JoinEnd::all_rejoined:
      counters_.joins_completed.fetch_add(1);
      break;
    case JoinEnd::rebalance_timeout:
      counters_.joins_expired.fetch_add(1);
      break;
    case JoinEnd::initial_delay:
      counters_.initial_joins.fetch_add(1);
      break;
  }
  // Every member left has rejoined, so one of them can lead. (Kafka waits another rebalance
  // timeout when none did, which only static members, not spoken here, can cause.)
  group->maybe_elect_new_joined_leader();
  group->init_next_generation();
  join_outcome(*group, end, evicted, now() - group->join_phase_started);
  if (group->is(GroupState::empty)) {
    event(fmt::format("group {}: generation {} is Empty ({})", group->group_id(),
                      group->generation_id(), how));
    maybe_remove_group(group);
    return;
  }
  counters_.generations.fetch_add(1);
  event(
      fmt::format("group {}: generation {} CompletingRebalance with {} member(s), protocol {}, "
                  "leader {} ({})",
                  group->group_id(), group->generation_id(), group->size(),
                  group->protocol_name().value_or(""), group->leader_id().value_or(""), how));
  for (MemberMetadata* member : group->members()) {
    JoinGroupResponse r;
    r.generation_id = group->generation_id();
    r.protocol_name = group->protocol_name().value_or("");
    r.leader = group->leader_id().value_or("");
    r.member_id = member->member_id;
    if (group->is_leader(member->member_id)) r.members = group->current_member_metadata();
    group->maybe_invoke_join_callback(*member, r, how);
    complete_and_schedule_next_heartbeat(group, *member);
    member->is_new = false;
  }
}

void GroupCoordinator::join_outcome(const GroupMetadata& group, JoinEnd end,
                                    const std::vector<std::string>& evicted, Nanos waited) const {
  const std::string& id = group.group_id();
  const std::string next =
      group.is(GroupState::empty)
          ? fmt::format("{} is Empty (generation {})", id, group.generation_id())
          : fmt::format("generation {} starts with {} member(s), leader {}", group.generation_id(),
                        group.size(), group.leader_id().value_or(""));
  switch (end) {
    case JoinEnd::all_rejoined: {
      const std::string why =
          group.size() == 0 ? "no member left to wait for" : "every member rejoined";
      outcome("join", id, "completed", waited, why,
              fmt::format("join phase of {} completed after {}: {}; {}", id, plain_duration(waited),
                          why, next));
      break;
    }
    case JoinEnd::rebalance_timeout:
      outcome("join", id, "expired", waited,
              fmt::format("rebalance timeout: {} member(s) evicted", evicted.size()),
              fmt::format("join phase of {} expired after {} (the rebalance timeout): {}; {}", id,
                          plain_duration(waited),
                          evicted.empty() ? std::string("no member to evict")
                                          : fmt::format("{} did not rejoin and {} evicted",
                                                        fmt::join(evicted, ", "),
                                                        evicted.size() == 1 ? "is" : "are"),
                          next));
      break;
    case JoinEnd::initial_delay:
      outcome("join", id, "delay over", waited, "the initial rebalance delay passed",
              fmt::format("join phase of {} ended after the initial rebalance delay ({}); {}", id,
                          plain_duration(waited), next));
      break;
  }
}

}  // namespace purgatory::broker
