// The group membership protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the two
// purgatories' callbacks, after Kafka's GroupCoordinator.scala. Offsets and the tools' queries
// are in group_offsets.cpp.
#include "purgatory/broker/group_coordinator.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <random>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "delayed_heartbeat.hpp"
#include "delayed_join.hpp"
#include "group_metadata.hpp"

namespace purgatory::broker {

namespace {

using std::chrono::milliseconds;

GroupConfig checked(GroupConfig config) {
  if (config.min_session_timeout.count() < 0 || config.initial_rebalance_delay.count() < 0 ||
      config.new_member_join_timeout.count() < 0) {
    throw std::invalid_argument(fmt::format(
        "group config: negative timeout (min_session_timeout {} ms, initial_rebalance_delay {} "
        "ms, new_member_join_timeout {} ms)",
        config.min_session_timeout.count(), config.initial_rebalance_delay.count(),
        config.new_member_join_timeout.count()));
  }
  if (config.min_session_timeout > config.max_session_timeout) {
    throw std::invalid_argument(
        fmt::format("group config: min_session_timeout {} ms > max_session_timeout {} ms",
                    config.min_session_timeout.count(), config.max_session_timeout.count()));
  }
  return config;
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

JoinGroupResponse join_error(Errc error, std::string member_id) {
  JoinGroupResponse r;
  r.error_code = error;
  r.member_id = std::move(member_id);
  return r;
}

SyncGroupResponse sync_error(Errc error) {
  SyncGroupResponse r;
  r.error_code = error;
  return r;
}

}  // namespace

std::string_view to_string(GroupState state) noexcept {
  switch (state) {
    case GroupState::empty:
      return "Empty";
    case GroupState::preparing_rebalance:
      return "PreparingRebalance";
    case GroupState::completing_rebalance:
      return "CompletingRebalance";
    case GroupState::stable:
      return "Stable";
    case GroupState::dead:
      return "Dead";
  }
  return "Unknown";
}

GroupCoordinator::GroupCoordinator(std::shared_ptr<SystemTimer> timer, GroupConfig config,
                                   GroupCoordinatorHooks hooks)
    : config_(checked(config)),
      hooks_(std::move(hooks)),
      timer_(std::move(timer)),
      member_id_state_((static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
                       std::random_device{}()) {
  if (!timer_) throw std::invalid_argument("GroupCoordinator: the timer is null");
  const auto options = [this](const char* name) {
    PurgatoryOptions o;
    o.name = name;
    o.shards = 1;  // one thread touches it
    o.on_callback_error = [this](const DelayedOperation&, std::exception_ptr error,
                                 std::string_view where) {
      std::string what = "a non-std exception";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      const std::string line = fmt::format("error: a group operation's {} threw: {}", where, what);
      if (hooks_.on_error) {
        hooks_.on_error(line);
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    };
    return o;
  };
  join_purgatory_ = std::make_unique<JoinPurgatory>(timer_, options("join"));
  heartbeat_purgatory_ = std::make_unique<HeartbeatPurgatory>(timer_, options("heartbeat"));
}

GroupCoordinator::~GroupCoordinator() {
  shutdown();
}

void GroupCoordinator::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  join_purgatory_->shutdown();
  heartbeat_purgatory_->shutdown();
  for (auto& [id, group] : groups_)
    group->transition_to(GroupState::dead);
  groups_.clear();  // drops the parked callbacks (their connections are closed by now)
  counters_.groups.store(0);
  counters_.members.store(0);
}

GroupCoordinatorStats GroupCoordinator::stats() const {
  GroupCoordinatorStats s;
  s.rebalances = counters_.rebalances.load();
  s.joins_completed = counters_.joins_completed.load();
  s.joins_expired = counters_.joins_expired.load();
  s.initial_joins = counters_.initial_joins.load();
  s.initial_delays_extended = counters_.initial_delays_extended.load();
  s.generations = counters_.generations.load();
  s.members_evicted = counters_.members_evicted.load();
  s.sessions_expired = counters_.sessions_expired.load();
  s.pending_members_expired = counters_.pending_members_expired.load();
  s.members_left = counters_.members_left.load();
  s.offsets_committed = counters_.offsets_committed.load();
  s.groups = counters_.groups.load();
  s.members = counters_.members.load();
  return s;
}

void GroupCoordinator::event(std::string_view text) const {
  if (hooks_.on_event) hooks_.on_event(text);
}

std::string GroupCoordinator::new_member_id(const std::string& client_id) {
  // Kafka's clientId-UUID.
  const std::uint64_t a = splitmix64(member_id_state_);
  const std::uint64_t b = splitmix64(member_id_state_);
  return fmt::format("{}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", client_id, a >> 32,
                     (a >> 16) & 0xFFFF, a & 0xFFFF, b >> 48, b & 0xFFFFFFFFFFFFULL);
}

GroupCoordinator::GroupRef GroupCoordinator::find_group(const std::string& group_id) const {
  const auto it = groups_.find(group_id);
  return it == groups_.end() ? nullptr : it->second;
}

GroupCoordinator::GroupRef GroupCoordinator::get_or_create_group(const std::string& group_id) {
  auto [it, inserted] = groups_.try_emplace(group_id);
  if (inserted) {
    it->second = std::make_shared<GroupMetadata>(group_id);
    counters_.groups.fetch_add(1);
  }
  return it->second;
}

void GroupCoordinator::maybe_remove_group(const GroupRef& group) {
  if (!group->is(GroupState::empty) || group->size() != 0 || group->has_pending_members() ||
      !group->offsets().empty()) {
    return;
  }
  group->transition_to(GroupState::dead);
  const auto it = groups_.find(group->group_id());
  if (it != groups_.end() && it->second == group) {
    groups_.erase(it);
    counters_.groups.fetch_sub(1);
  }
  if (group->generation_id() > 0) {
    event(fmt::format("group {}: Empty with no offset committed: forgotten (Dead)",
                      group->group_id()));
  }
}

// ---- JoinGroup ------------------------------------------------------------------------------

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
    op = OperationRef(new InitialDelayedJoin(*this, group, delay, remaining));
    waits = fmt::format("the initial rebalance delay, {} ms", delay);
  } else {
    op = OperationRef(new DelayedJoin(*this, group, group->rebalance_timeout_ms()));
    waits = group->size() == 0 ? std::string("no member: nobody is left to wait for")
                               : fmt::format("{} member(s) to rejoin, up to {} ms", group->size(),
                                             group->rebalance_timeout_ms());
  }
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
  join_purgatory_->try_complete_else_watch(
      OperationRef(new InitialDelayedJoin(*this, group, delay, remaining)), {group->group_id()});
  return true;
}

void GroupCoordinator::on_complete_join(const GroupRef& group, JoinEnd end, std::string_view how) {
  if (group->is(GroupState::dead)) return;
  for (const std::string& id : group->not_yet_rejoined_members()) {
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
  remove_heartbeat_for_leaving_member(group, *member);
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
  member.heartbeat_satisfied = true;
  heartbeat_purgatory_->check_and_complete(key);  // the previous session operation completes
  member.heartbeat_satisfied = false;
  heartbeat_purgatory_->try_complete_else_watch(
      OperationRef(new DelayedHeartbeat(*this, group, member.member_id, false, timeout)), {key});
}

void GroupCoordinator::add_pending_member_expiration(const GroupRef& group,
                                                     const std::string& member_id,
                                                     milliseconds timeout) {
  heartbeat_purgatory_->try_complete_else_watch(
      OperationRef(new DelayedHeartbeat(*this, group, member_id, true, timeout)),
      {MemberKey{group->group_id(), member_id}});
}

void GroupCoordinator::remove_heartbeat_for_leaving_member(const GroupRef& group,
                                                           MemberMetadata& member) {
  member.is_leaving = true;
  heartbeat_purgatory_->check_and_complete(MemberKey{group->group_id(), member.member_id});
}

bool GroupCoordinator::can_complete_heartbeat(const GroupMetadata& group,
                                              const std::string& member_id, bool is_pending) const {
  if (group.is(GroupState::dead)) return true;
  if (is_pending) return group.has(member_id);  // it joined with its id
  const MemberMetadata* member = group.find(member_id);
  return member == nullptr || member->has_satisfied_heartbeat() || member->is_leaving;
}

void GroupCoordinator::on_expire_heartbeat(const GroupRef& group, const std::string& member_id,
                                           bool is_pending) {
  if (shut_down_ || group->is(GroupState::dead)) return;
  if (is_pending) {
    if (!group->is_pending_member(member_id)) return;
    counters_.pending_members_expired.fetch_add(1);
    event(
        fmt::format("group {}: member id {} (MEMBER_ID_REQUIRED) was never used to join: "
                    "forgotten",
                    group->group_id(), member_id));
    remove_pending_member_and_update_group(group, member_id);
    return;
  }
  const MemberMetadata* member = group->find(member_id);
  if (member == nullptr || member->has_satisfied_heartbeat()) return;
  counters_.sessions_expired.fetch_add(1);
  if (member->is_new) {
    event(
        fmt::format("group {}: new member {} saw no join phase through within {} ms: expired "
                    "by the heartbeat purgatory, removed",
                    group->group_id(), member_id, config_.new_member_join_timeout.count()));
  } else {
    event(
        fmt::format("group {}: member {} sent no heartbeat within its session timeout ({} ms): "
                    "expired by the heartbeat purgatory, removed",
                    group->group_id(), member_id, member->session_timeout_ms));
  }
  remove_member_and_update_group(group, member_id,
                                 fmt::format("member {} session expired", member_id));
}

// ---- membership ---------------------------------------------------------------------------------

void GroupCoordinator::remove_member(const GroupRef& group, const std::string& member_id) {
  if (!group->has(member_id)) return;
  group->remove(member_id);
  counters_.members.fetch_sub(1);
}

void GroupCoordinator::remove_member_and_update_group(const GroupRef& group,
                                                      const std::string& member_id,
                                                      std::string_view reason) {
  MemberMetadata* member = group->find(member_id);
  if (member == nullptr) return;
  // Whatever it still has parked is answered: a client still there joins again.
  group->maybe_invoke_join_callback(*member, join_error(Errc::unknown_member_id, ""),
                                    fmt::format("removed from the group: {}", reason));
  group->maybe_invoke_sync_callback(*member, sync_error(Errc::unknown_member_id),
                                    fmt::format("removed from the group: {}", reason));
  remove_member(group, member_id);
  switch (group->state()) {
    case GroupState::empty:
    case GroupState::dead:
      break;
    case GroupState::stable:
    case GroupState::completing_rebalance:
      maybe_prepare_rebalance(group, reason);
      break;
    case GroupState::preparing_rebalance:
      join_purgatory_->check_and_complete(group->group_id());  // it may have been the last one
      break;
  }
}

void GroupCoordinator::remove_pending_member_and_update_group(const GroupRef& group,
                                                              const std::string& member_id) {
  group->remove_pending_member(member_id);
  if (group->is(GroupState::preparing_rebalance)) {
    join_purgatory_->check_and_complete(group->group_id());
  }
  maybe_remove_group(group);
}

}  // namespace purgatory::broker
