// GroupMetadata and MemberMetadata: one consumer group's state, as Kafka's GroupMetadata.scala
// and MemberMetadata.scala keep it. Plain bookkeeping: the decisions (when to rebalance, whom to
// evict) are GroupCoordinator's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "group/group_coordinator.hpp"
#include "offset_store.hpp"
#include "protocol/join_group.hpp"
#include "protocol/sync_group.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// The answers a parked JoinGroup or SyncGroup gets when it fails.
inline JoinGroupResponse join_error(Errc error, std::string member_id) {
  JoinGroupResponse r;
  r.error_code = error;
  r.member_id = std::move(member_id);
  return r;
}

inline SyncGroupResponse sync_error(Errc error) {
  SyncGroupResponse r;
  r.error_code = error;
  return r;
}

// A duration as a person says it in a log line: "312 ms", "1.5 s", "10 s".
[[nodiscard]] std::string plain_duration(Nanos d);

// Thread-compatible (owned by its group).
struct MemberMetadata {
  std::string member_id;
  std::string client_id;
  std::string client_host;
  std::int32_t rebalance_timeout_ms = 0;
  std::int32_t session_timeout_ms = 0;
  std::string protocol_type;
  std::vector<JoinGroupProtocol> protocols;  // in the member's order of preference
  std::uint64_t join_order = 0;              // who joined first leads
  Bytes assignment;                          // from the leader's SyncGroup
  JoinCallback awaiting_join;                // set while its JoinGroup waits for the join phase
  SyncCallback awaiting_sync;                // set while its SyncGroup waits for the leader's
  // Joined, but no join phase completed since: its session is not yet running (it has none to
  // heartbeat with), only GroupConfig::new_member_join_timeout.
  bool is_new = false;
  bool heartbeat_satisfied = false;  // set for the instant a heartbeat completes its operation
  bool is_leaving = false;           // LeaveGroup: its heartbeat operation may complete
  Nanos session_started{0};          // when its latest DelayedHeartbeat began (timer's clock)

  [[nodiscard]] bool is_awaiting_join() const noexcept { return static_cast<bool>(awaiting_join); }
  [[nodiscard]] bool is_awaiting_sync() const noexcept { return static_cast<bool>(awaiting_sync); }
  // Kafka's hasSatisfiedHeartbeat: a member waiting in a join or sync phase is alive by
  // definition (that phase has its own timeout), except a new one.
  [[nodiscard]] bool has_satisfied_heartbeat() const noexcept;
  // Same protocols, same metadata, same order: a rejoin that changes nothing.
  [[nodiscard]] bool matches(const std::vector<JoinGroupProtocol>& others) const;
  // The metadata it sent for `protocol`; null if it does not support it.
  [[nodiscard]] const Bytes* metadata(std::string_view protocol) const;
};

// Thread-compatible (the coordinator's thread only).
class GroupMetadata {
 public:
  explicit GroupMetadata(std::string group_id) : group_id_(std::move(group_id)) {}

  [[nodiscard]] const std::string& group_id() const noexcept { return group_id_; }
  [[nodiscard]] GroupState state() const noexcept { return state_; }
  [[nodiscard]] bool is(GroupState s) const noexcept { return state_ == s; }
  // Kafka's canRebalance: PreparingRebalance may follow.
  [[nodiscard]] bool can_rebalance() const noexcept;
  // Precondition (asserted): `to` may follow the current state (Kafka's validPreviousStates).
  void transition_to(GroupState to);

  [[nodiscard]] std::int32_t generation_id() const noexcept { return generation_id_; }
  [[nodiscard]] const std::optional<std::string>& protocol_type() const noexcept {
    return protocol_type_;
  }
  [[nodiscard]] const std::optional<std::string>& protocol_name() const noexcept {
    return protocol_name_;
  }
  [[nodiscard]] const std::optional<std::string>& leader_id() const noexcept { return leader_id_; }
  [[nodiscard]] bool is_leader(const std::string& member_id) const noexcept {
    return leader_id_ && *leader_id_ == member_id;
  }

  [[nodiscard]] bool has(const std::string& member_id) const { return members_.count(member_id); }
  // Null when not a member.
  [[nodiscard]] MemberMetadata* find(const std::string& member_id);
  [[nodiscard]] const MemberMetadata* find(const std::string& member_id) const;
  [[nodiscard]] std::size_t size() const noexcept { return members_.size(); }
  // Members in the order they joined (the leader's list, the elections, the log lines).
  [[nodiscard]] std::vector<MemberMetadata*> members();
  [[nodiscard]] std::vector<const MemberMetadata*> members() const;

  // Kafka's add: the first member fixes the protocol type and leads.
  MemberMetadata& add(MemberMetadata member, JoinCallback awaiting_join);
  // Kafka's remove: a leader that leaves hands over to the longest-standing member.
  void remove(const std::string& member_id);
  // A known member joins again: new protocols and timeouts, a new callback waiting.
  void update_member(MemberMetadata& member, std::vector<JoinGroupProtocol> protocols,
                     std::int32_t rebalance_timeout_ms, std::int32_t session_timeout_ms,
                     JoinCallback awaiting_join);

  // Members told MEMBER_ID_REQUIRED, expected to join again with that id.
  void add_pending_member(const std::string& member_id) { pending_.insert(member_id); }
  [[nodiscard]] bool is_pending_member(const std::string& member_id) const {
    return pending_.count(member_id) != 0;
  }
  bool remove_pending_member(const std::string& member_id) { return pending_.erase(member_id); }
  [[nodiscard]] bool has_pending_members() const noexcept { return !pending_.empty(); }
  [[nodiscard]] std::size_t pending_members() const noexcept { return pending_.size(); }

  // Kafka's supportsProtocols: an empty group takes any non-empty protocol list; otherwise the
  // type must match and one protocol must be supported by every member.
  [[nodiscard]] bool supports_protocols(const std::string& protocol_type,
                                        const std::vector<JoinGroupProtocol>& protocols) const;
  // Kafka's hasAllMembersJoined: every member waits in a JoinGroup, no member id is pending.
  [[nodiscard]] bool has_all_members_joined() const noexcept {
    return members_.size() == awaiting_join_ && pending_.empty();
  }
  [[nodiscard]] std::vector<std::string> not_yet_rejoined_members() const;
  // Makes a member that rejoined the leader if the leader did not; false when none rejoined.
  bool maybe_elect_new_joined_leader();
  // The longest rebalance timeout of the members: how long a join phase may take.
  [[nodiscard]] std::int32_t rebalance_timeout_ms() const noexcept;
  // Kafka's initNextGeneration: generation + 1, the protocol most members prefer, then
  // CompletingRebalance (or Empty when nobody is left).
  void init_next_generation();
  // What the leader is told: every member's metadata for the selected protocol.
  [[nodiscard]] std::vector<JoinGroupMember> current_member_metadata() const;

  // Answers and clears the member's parked JoinGroup / SyncGroup, if any.
  bool maybe_invoke_join_callback(MemberMetadata& member, const JoinGroupResponse& response,
                                  std::string_view how);
  bool maybe_invoke_sync_callback(MemberMetadata& member, const SyncGroupResponse& response,
                                  std::string_view how);

  // An empty group's first join phase is waiting out its initial delay and a member came.
  bool new_member_added = false;
  // The join phase under way (PreparingRebalance): when its operation began (timer's clock), and
  // whether it is an InitialDelayedJoin.
  Nanos join_phase_started{0};
  bool initial_join_phase = false;

  [[nodiscard]] OffsetStore& offsets() noexcept { return offsets_; }
  [[nodiscard]] const OffsetStore& offsets() const noexcept { return offsets_; }

 private:
  [[nodiscard]] std::string select_protocol() const;
  void count_protocols(const MemberMetadata& member, int delta);

  std::string group_id_;
  GroupState state_ = GroupState::empty;
  std::int32_t generation_id_ = 0;
  std::optional<std::string> protocol_type_;
  std::optional<std::string> protocol_name_;
  std::optional<std::string> leader_id_;
  std::map<std::string, MemberMetadata> members_;
  std::unordered_set<std::string> pending_;
  std::map<std::string, std::size_t> supported_protocols_;  // protocol -> members supporting it
  std::size_t awaiting_join_ = 0;                           // members with awaiting_join set
  OffsetStore offsets_;
};

}  // namespace purgatory::broker
