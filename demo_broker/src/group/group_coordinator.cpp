// GroupCoordinator, after Kafka's GroupCoordinator.scala: construction, shutdown, the groups'
// lifecycle and member removal. The join phase is in group_join.cpp; SyncGroup, heartbeats,
// sessions and LeaveGroup in group_sessions.cpp; offsets and the tools' queries in
// group_offsets.cpp.
#include "group/group_coordinator.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "group_metadata.hpp"

namespace purgatory::broker {

namespace {

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

}  // namespace

std::string plain_duration(Nanos d) {
  const double ms = std::chrono::duration<double, std::milli>(d).count();
  if (ms < 1000) return fmt::format("{:.0f} ms", ms);
  if (ms >= 9950) return fmt::format("{:.0f} s", ms / 1000);
  std::string s = fmt::format("{:.1f}", ms / 1000);
  if (s.ends_with(".0")) s.resize(s.size() - 2);
  return s + " s";
}

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

std::string to_string(const MemberKey& key) {
  return key.group_id + "/" + key.member_id;
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

void GroupCoordinator::outcome(std::string_view purgatory, std::string key, std::string_view how,
                               Nanos waited, std::string why, std::string text) const {
  if (!hooks_.on_outcome) return;
  hooks_.on_outcome(
      GroupOutcome{purgatory, std::move(key), how, waited, std::move(why), std::move(text)});
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
