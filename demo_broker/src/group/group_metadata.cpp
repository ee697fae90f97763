#include "group_metadata.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace purgatory::broker {

namespace {

template <class Members>
auto in_join_order(Members& members) {
  using Ptr = decltype(&members.begin()->second);
  std::vector<Ptr> out;
  out.reserve(members.size());
  for (auto& [id, m] : members)
    out.push_back(&m);
  std::sort(out.begin(), out.end(), [](Ptr a, Ptr b) { return a->join_order < b->join_order; });
  return out;
}

}  // namespace

bool MemberMetadata::has_satisfied_heartbeat() const noexcept {
  if (is_new) return heartbeat_satisfied;
  if (is_awaiting_join() || is_awaiting_sync()) return true;
  return heartbeat_satisfied;
}

bool MemberMetadata::matches(const std::vector<JoinGroupProtocol>& others) const {
  return protocols == others;
}

const Bytes* MemberMetadata::metadata(std::string_view protocol) const {
  for (const JoinGroupProtocol& p : protocols) {
    if (p.name == protocol) return &p.metadata;
  }
  return nullptr;
}

bool GroupMetadata::can_rebalance() const noexcept {
  return state_ == GroupState::stable || state_ == GroupState::completing_rebalance ||
         state_ == GroupState::empty;
}

void GroupMetadata::transition_to(GroupState to) {
  [[maybe_unused]] const auto valid_from = [this](std::initializer_list<GroupState> from) {
    return std::find(from.begin(), from.end(), state_) != from.end();
  };
  switch (to) {
    case GroupState::preparing_rebalance:
      assert(valid_from({GroupState::stable, GroupState::completing_rebalance, GroupState::empty}));
      break;
    case GroupState::completing_rebalance:
      assert(valid_from({GroupState::preparing_rebalance}));
      break;
    case GroupState::stable:
      assert(valid_from({GroupState::completing_rebalance}));
      break;
    case GroupState::empty:
      assert(valid_from({GroupState::preparing_rebalance}));
      break;
    case GroupState::dead:
      break;  // from anywhere
  }
  state_ = to;
}

MemberMetadata* GroupMetadata::find(const std::string& member_id) {
  const auto it = members_.find(member_id);
  return it == members_.end() ? nullptr : &it->second;
}

const MemberMetadata* GroupMetadata::find(const std::string& member_id) const {
  const auto it = members_.find(member_id);
  return it == members_.end() ? nullptr : &it->second;
}

std::vector<MemberMetadata*> GroupMetadata::members() {
  return in_join_order(members_);
}

std::vector<const MemberMetadata*> GroupMetadata::members() const {
  return in_join_order(members_);
}

void GroupMetadata::count_protocols(const MemberMetadata& member, int delta) {
  for (const JoinGroupProtocol& p : member.protocols) {
    std::size_t& n = supported_protocols_[p.name];
    n = delta > 0 ? n + 1 : n - 1;
    if (n == 0) supported_protocols_.erase(p.name);
  }
}

MemberMetadata& GroupMetadata::add(MemberMetadata member, JoinCallback awaiting_join) {
  if (members_.empty()) protocol_type_ = member.protocol_type;
  assert(protocol_type_ == member.protocol_type);
  if (!leader_id_) leader_id_ = member.member_id;
  pending_.erase(member.member_id);
  const std::string id = member.member_id;
  MemberMetadata& m = members_.insert_or_assign(id, std::move(member)).first->second;
  count_protocols(m, +1);
  m.awaiting_join = std::move(awaiting_join);
  if (m.is_awaiting_join()) ++awaiting_join_;
  return m;
}

void GroupMetadata::remove(const std::string& member_id) {
  const auto it = members_.find(member_id);
  if (it != members_.end()) {
    count_protocols(it->second, -1);
    if (it->second.is_awaiting_join()) --awaiting_join_;
    members_.erase(it);
  }
  if (is_leader(member_id)) {
    const std::vector<MemberMetadata*> rest = members();
    leader_id_ = rest.empty() ? std::nullopt : std::optional<std::string>(rest.front()->member_id);
  }
}

void GroupMetadata::update_member(MemberMetadata& member, std::vector<JoinGroupProtocol> protocols,
                                  std::int32_t rebalance_timeout_ms,
                                  std::int32_t session_timeout_ms, JoinCallback awaiting_join) {
  count_protocols(member, -1);
  member.protocols = std::move(protocols);
  count_protocols(member, +1);
  member.rebalance_timeout_ms = rebalance_timeout_ms;
  member.session_timeout_ms = session_timeout_ms;
  if (member.is_awaiting_join()) {
    // The same member joined again while its first JoinGroup still waits (a client that timed
    // out and retried, typically on a new connection): the old request is answered now, so no
    // connection keeps a response slot that would never be filled.
    JoinGroupResponse superseded;
    superseded.error_code = Errc::rebalance_in_progress;
    superseded.member_id = member.member_id;
    maybe_invoke_join_callback(member, superseded, "superseded by a newer JoinGroup");
  }
  member.awaiting_join = std::move(awaiting_join);
  if (member.is_awaiting_join()) ++awaiting_join_;
}

bool GroupMetadata::supports_protocols(const std::string& protocol_type,
                                       const std::vector<JoinGroupProtocol>& protocols) const {
  if (is(GroupState::empty)) return !protocol_type.empty() && !protocols.empty();
  if (protocol_type_ != protocol_type) return false;
  return std::any_of(protocols.begin(), protocols.end(), [this](const JoinGroupProtocol& p) {
    const auto it = supported_protocols_.find(p.name);
    return members_.empty() || (it != supported_protocols_.end() && it->second == members_.size());
  });
}

std::vector<std::string> GroupMetadata::not_yet_rejoined_members() const {
  std::vector<std::string> out;
  for (const MemberMetadata* m : members()) {
    if (!m->is_awaiting_join()) out.push_back(m->member_id);
  }
  return out;
}

bool GroupMetadata::maybe_elect_new_joined_leader() {
  if (leader_id_) {
    const MemberMetadata* leader = find(*leader_id_);
    if (leader != nullptr && leader->is_awaiting_join()) return true;
  }
  for (const MemberMetadata* m : members()) {
    if (m->is_awaiting_join()) {
      leader_id_ = m->member_id;
      return true;
    }
  }
  return false;
}

std::int32_t GroupMetadata::rebalance_timeout_ms() const noexcept {
  std::int32_t longest = 0;
  for (const auto& [id, m] : members_)
    longest = std::max(longest, m.rebalance_timeout_ms);
  return longest;
}

std::string GroupMetadata::select_protocol() const {
  // Candidates: supported by every member. Each member votes for its most preferred candidate;
  // the most votes win, ties going to the protocol the longest-standing member prefers.
  std::map<std::string, std::size_t> votes;
  for (const MemberMetadata* m : members()) {
    for (const JoinGroupProtocol& p : m->protocols) {
      const auto it = supported_protocols_.find(p.name);
      if (it == supported_protocols_.end() || it->second != members_.size()) continue;
      ++votes[p.name];
      break;
    }
  }
  std::string best;
  std::size_t best_votes = 0;
  for (const JoinGroupProtocol& p : members().front()->protocols) {
    const auto it = votes.find(p.name);
    if (it != votes.end() && it->second > best_votes) {
      best = p.name;
      best_votes = it->second;
    }
  }
  assert(!best.empty());  // supports_protocols() kept one protocol common to every member
  return best;
}

void GroupMetadata::init_next_generation() {
  ++generation_id_;
  if (!members_.empty()) {
    protocol_name_ = select_protocol();
    transition_to(GroupState::completing_rebalance);
  } else {
    protocol_name_.reset();
    transition_to(GroupState::empty);
  }
}

std::vector<JoinGroupMember> GroupMetadata::current_member_metadata() const {
  std::vector<JoinGroupMember> out;
  const std::string protocol = protocol_name_.value_or("");
  for (const MemberMetadata* m : members()) {
    const Bytes* metadata = m->metadata(protocol);
    out.push_back({m->member_id, metadata != nullptr ? *metadata : Bytes()});
  }
  return out;
}

bool GroupMetadata::maybe_invoke_join_callback(MemberMetadata& member,
                                               const JoinGroupResponse& response,
                                               std::string_view how) {
  if (!member.is_awaiting_join()) return false;
  const JoinCallback done = std::move(member.awaiting_join);
  member.awaiting_join = nullptr;
  --awaiting_join_;
  done(response, how);
  return true;
}

bool GroupMetadata::maybe_invoke_sync_callback(MemberMetadata& member,
                                               const SyncGroupResponse& response,
                                               std::string_view how) {
  if (!member.is_awaiting_sync()) return false;
  const SyncCallback done = std::move(member.awaiting_sync);
  member.awaiting_sync = nullptr;
  done(response, how);
  return true;
}

}  // namespace purgatory::broker
