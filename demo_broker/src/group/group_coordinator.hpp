// GroupCoordinator: Kafka's classic consumer-group coordinator (GroupCoordinator.scala, before
// KIP-848) for a single broker, in memory, on the library's purgatories.
//
// A group moves through Kafka's states:
//
//   Empty --join--> PreparingRebalance --join phase ends--> CompletingRebalance --leader's
//   SyncGroup--> Stable --member joins/leaves/expires--> PreparingRebalance ...
//   (a join phase that ends with no member left goes back to Empty; a group removed is Dead)
//
// Two purgatories do the waiting, as in Kafka:
//   - the join purgatory holds one DelayedJoin per rebalancing group, watched on the group id. It
//     completes when every known member has sent its JoinGroup again (each JoinGroup checks it),
//     or expires at the rebalance timeout (the largest of the members'); either way the members
//     that did not rejoin are evicted, the next generation starts and the parked JoinGroups are
//     answered, the leader's with every member's subscription. An empty group's first join
//     phase is an InitialDelayedJoin: it never completes early, it waits
//     GroupConfig::initial_rebalance_delay, and again each time a new member came meanwhile.
//   - the heartbeat purgatory holds one DelayedHeartbeat per member, watched on (group, member),
//     with the session timeout. A heartbeat (or a commit, a join, a sync) completes it and
//     watches a new one; if it expires, the member is removed and the group rebalances. A member
//     waiting in a join or sync phase counts as alive (the join phase has its own timeout), so a
//     client that vanishes mid-rebalance is evicted by the join phase or expired by its session
//     right after, never waited for forever.
// Committed offsets live with their group (OffsetCommit / OffsetFetch).
//
// What is seen of it: stats() counts, snapshot() copies the groups with their purgatories' timing
// (group_snapshot.hpp), and GroupCoordinatorHooks::on_outcome tells how each join phase ended and
// each session that did not end with a routine heartbeat (an expiry, a LeaveGroup), in words.
//
// Errors are Kafka's error codes in the answers (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// REBALANCE_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, ...); nothing
// here throws for bad input. Every parked JoinGroup and SyncGroup gets exactly one answer
// (superseded or evicted ones get an error), and none after shutdown().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "group/group_config.hpp"
#include "group/group_coordinator_stats.hpp"
#include "protocol/describe_groups.hpp"
#include "protocol/heartbeat.hpp"
#include "protocol/join_group.hpp"
#include "protocol/leave_group.hpp"
#include "protocol/list_groups.hpp"
#include "protocol/offset_commit.hpp"
#include "protocol/offset_fetch.hpp"
#include "protocol/sync_group.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory::broker {

class GroupMetadata;
struct MemberMetadata;
struct GroupCoordinatorSnapshot;
struct GroupSnapshotLimits;

enum class GroupState : std::uint8_t {
  empty,
  preparing_rebalance,
  completing_rebalance,
  stable,
  dead,
};

// Kafka's name: "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead".
[[nodiscard]] std::string_view to_string(GroupState state) noexcept;

// The heartbeat purgatory's key: Kafka's MemberKey. A plain value, thread-compatible.
struct MemberKey {
  std::string group_id;
  std::string member_id;

  bool operator==(const MemberKey&) const = default;
};

// "g1/m-2": how the live view and the outcome log write it.
[[nodiscard]] std::string to_string(const MemberKey& key);

struct MemberKeyHash {
  std::size_t operator()(const MemberKey& k) const noexcept {
    const std::size_t h = std::hash<std::string>{}(k.group_id);
    return h ^
           (std::hash<std::string>{}(k.member_id) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
  }
};

// How an operation of the join or heartbeat purgatory ended, in words, for the live view's outcome
// log. A heartbeat renewing a session completes an operation too, but is not told: one per member
// every few seconds would drown the rest. A plain value, thread-compatible.
struct GroupOutcome {
  std::string_view purgatory;  // "join" or "heartbeat"
  std::string key;             // the group ("g1"), or group and member ("g1/m-2")
  // join: "completed" (every member rejoined), "expired" (the rebalance timeout passed), "delay
  // over" (an initial rebalance delay passed, as it always does). heartbeat: "expired" (a session
  // lapsed), "completed" (a LeaveGroup ended it).
  std::string_view outcome;
  Nanos waited{0};   // from the operation's start to this outcome, on the timer's clock
  std::string why;   // the reason, short: "rebalance timeout: 1 member(s) evicted"
  std::string text;  // the whole sentence: "member m-2 of g1 expired by the heartbeat purgatory
                     // after 10 s without a heartbeat; g1 rebalances"
};

// Answers a parked JoinGroup or SyncGroup, once. `how` says how its wait ended, for the log line
// ("join phase completed: every member rejoined", ...).
using JoinCallback = std::function<void(const JoinGroupResponse& response, std::string_view how)>;
using SyncCallback = std::function<void(const SyncGroupResponse& response, std::string_view how)>;

// What the coordinator needs from around it. Every member may be null. A plain value,
// thread-compatible; the coordinator calls them on its thread.
struct GroupCoordinatorHooks {
  // Whether a partition exists (OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION otherwise). Null:
  // every partition exists.
  std::function<bool(const std::string& topic, std::int32_t partition)> partition_exists;
  // Told of every group event worth a timeline line (state changes, evictions, expiries).
  std::function<void(std::string_view event)> on_event;
  // Told how the join and heartbeat purgatories' operations ended (see GroupOutcome).
  std::function<void(const GroupOutcome& outcome)> on_outcome;
  // Told of exceptions escaping the delayed operations' callbacks (a bug). Null: stderr.
  std::function<void(std::string_view error)> on_error;
};

// Who sent a JoinGroup, and how (JoinGroup v4+ requires a known member id: a new member is
// answered MEMBER_ID_REQUIRED with its id and must join again with it). A plain value,
// thread-compatible.
struct JoinContext {
  bool require_known_member_id = false;
  std::string client_id;
  std::string client_host;
};

// Call only from the thread that runs the timer's executor (the broker's io thread, or the test
// thread advancing a manual clock with an InlineExecutor): the delayed operations' callbacks run
// there and share the group state without a lock (snapshot() too reads it there, without one).
// Exceptions: stats(), join_metrics() and heartbeat_metrics() are thread-safe. Callbacks
// (JoinCallback, SyncCallback, hooks) are called on that thread with no lock held; they must not
// call back into the coordinator.
class GroupCoordinator {
 public:
  using JoinPurgatory = DelayedOperationPurgatory<std::string>;
  using HeartbeatPurgatory = DelayedOperationPurgatory<MemberKey, MemberKeyHash>;

  // Both purgatories share `timer` (not closed by shutdown()). Throws std::invalid_argument for a
  // null timer or a config with min_session_timeout > max_session_timeout or negative delays.
  GroupCoordinator(std::shared_ptr<SystemTimer> timer, GroupConfig config,
                   GroupCoordinatorHooks hooks = {});
  // shutdown().
  ~GroupCoordinator();
  GroupCoordinator(const GroupCoordinator&) = delete;
  GroupCoordinator& operator=(const GroupCoordinator&) = delete;

  // Kafka's handleJoinGroup. `done` is called once: at once for an error, MEMBER_ID_REQUIRED or a
  // member rejoining a settled generation unchanged; otherwise when the join phase ends. A
  // rebalance_timeout_ms below 0 (JoinGroup v0) means the session timeout.
  void join_group(const JoinGroupRequest& req, const JoinContext& ctx, JoinCallback done);
  // Kafka's handleSyncGroup. `done` is called once: at once, or (a follower waiting for the
  // leader's assignment) when the leader's SyncGroup arrives or the group rebalances again.
  void sync_group(const SyncGroupRequest& req, SyncCallback done);
  // Kafka's handleHeartbeat: NONE, REBALANCE_IN_PROGRESS (join again), or an error.
  Errc heartbeat(const HeartbeatRequest& req);
  // Kafka's handleLeaveGroup.
  Errc leave_group(const LeaveGroupRequest& req);
  // Kafka's handleCommitOffsets. A generation of -1 with member "" (OffsetCommit v0, or a
  // consumer using assign()) commits for a group nobody joined.
  OffsetCommitResponse commit_offsets(const OffsetCommitRequest& req);
  // Kafka's handleFetchOffsets: -1 and metadata "" for partitions with nothing committed.
  [[nodiscard]] OffsetFetchResponse fetch_offsets(const OffsetFetchRequest& req) const;
  [[nodiscard]] ListGroupsResponse list_groups() const;
  // Whether the coordinator knows the group (it has members, pending members or offsets).
  [[nodiscard]] bool has_group(const std::string& group_id) const {
    return groups_.count(group_id) != 0;
  }
  // Unknown groups are described as Dead, with no error (as Kafka does).
  [[nodiscard]] DescribeGroupsResponse describe_groups(const DescribeGroupsRequest& req) const;

  // Shuts both purgatories down: their operations end with Outcome::shut_down and answer
  // nothing; the parked JoinGroup and SyncGroup callbacks are dropped unanswered. Later calls to
  // the handlers answer COORDINATOR_NOT_AVAILABLE. Idempotent.
  void shutdown();

  [[nodiscard]] const GroupConfig& config() const noexcept { return config_; }
  [[nodiscard]] GroupCoordinatorStats stats() const;
  // The groups (the first limits.max_groups by id) and both purgatories' waiting operations
  // (group_snapshot.hpp; include it to call this). Copies, bounded by `limits`; each purgatory's
  // shard lock is held only while its operations are copied, and the groups need none (they live
  // on this thread). Works after shutdown() too: then there is nothing to see.
  [[nodiscard]] GroupCoordinatorSnapshot snapshot(const GroupSnapshotLimits& limits) const;
  [[nodiscard]] PurgatoryMetrics join_metrics() const { return join_purgatory_->metrics(); }
  [[nodiscard]] PurgatoryMetrics heartbeat_metrics() const {
    return heartbeat_purgatory_->metrics();
  }

 private:
  friend class DelayedJoin;
  friend class InitialDelayedJoin;
  friend class DelayedHeartbeat;

  using GroupRef = std::shared_ptr<GroupMetadata>;
  // How a join phase ended.
  enum class JoinEnd { all_rejoined, rebalance_timeout, initial_delay };

  struct Counters {
    std::atomic<std::uint64_t> rebalances{0};
    std::atomic<std::uint64_t> joins_completed{0};
    std::atomic<std::uint64_t> joins_expired{0};
    std::atomic<std::uint64_t> initial_joins{0};
    std::atomic<std::uint64_t> initial_delays_extended{0};
    std::atomic<std::uint64_t> generations{0};
    std::atomic<std::uint64_t> members_evicted{0};
    std::atomic<std::uint64_t> sessions_expired{0};
    std::atomic<std::uint64_t> pending_members_expired{0};
    std::atomic<std::uint64_t> members_left{0};
    std::atomic<std::uint64_t> offsets_committed{0};
    std::atomic<std::size_t> groups{0};
    std::atomic<std::size_t> members{0};
  };

  // ---- join ---------------------------------------------------------------------------------
  void do_new_member_join(const GroupRef& group, const JoinGroupRequest& req,
                          std::int32_t rebalance_timeout_ms, const JoinContext& ctx,
                          JoinCallback& done);
  void do_current_member_join(const GroupRef& group, const JoinGroupRequest& req,
                              std::int32_t rebalance_timeout_ms, const JoinContext& ctx,
                              JoinCallback& done);
  void add_member_and_rebalance(const GroupRef& group, const std::string& member_id,
                                const JoinGroupRequest& req, std::int32_t rebalance_timeout_ms,
                                const JoinContext& ctx, JoinCallback done);
  void update_member_and_rebalance(const GroupRef& group, MemberMetadata& member,
                                   const JoinGroupRequest& req, std::int32_t rebalance_timeout_ms,
                                   JoinCallback done, std::string_view reason);
  void maybe_prepare_rebalance(const GroupRef& group, std::string_view reason);
  void prepare_rebalance(const GroupRef& group, std::string_view reason);
  // DelayedJoin::try_complete / on_complete.
  bool can_complete_join(const GroupMetadata& group) const;
  void on_complete_join(const GroupRef& group, JoinEnd end, std::string_view how);
  // InitialDelayedJoin::on_complete: waits another delay (true) if a member came meanwhile.
  bool maybe_extend_initial_delay(const GroupRef& group, std::int32_t remaining_ms,
                                  std::int32_t delay_ms);

  // ---- sync ---------------------------------------------------------------------------------
  void set_and_propagate_assignment(const GroupRef& group);
  void reset_and_propagate_assignment_error(const GroupRef& group, Errc error);

  // ---- heartbeats -----------------------------------------------------------------------------
  // Kafka's completeAndScheduleNextExpiration: the member is alive now; its session restarts.
  void complete_and_schedule_next_heartbeat(const GroupRef& group, MemberMetadata& member);
  void complete_and_schedule_next_expiration(const GroupRef& group, MemberMetadata& member,
                                             std::chrono::milliseconds timeout);
  void add_pending_member_expiration(const GroupRef& group, const std::string& member_id,
                                     std::chrono::milliseconds timeout);
  // Whether a session operation was waiting (and is completed now).
  bool remove_heartbeat_for_leaving_member(const GroupRef& group, MemberMetadata& member);
  // DelayedHeartbeat::try_complete / on_expiration.
  bool can_complete_heartbeat(const GroupMetadata& group, const std::string& member_id,
                              bool is_pending) const;
  // `timeout`: the expired operation's.
  void on_expire_heartbeat(const GroupRef& group, const std::string& member_id, bool is_pending,
                           Nanos timeout);

  // ---- membership ---------------------------------------------------------------------------
  // Forgets the member (the gauges follow); its parked requests must have been answered.
  void remove_member(const GroupRef& group, const std::string& member_id);
  void remove_member_and_update_group(const GroupRef& group, const std::string& member_id,
                                      std::string_view reason);
  void remove_pending_member_and_update_group(const GroupRef& group, const std::string& member_id);
  GroupRef find_group(const std::string& group_id) const;
  GroupRef get_or_create_group(const std::string& group_id);
  // An Empty group with no member, no pending member and no offset is forgotten (Dead).
  void maybe_remove_group(const GroupRef& group);
  [[nodiscard]] std::string new_member_id(const std::string& client_id);
  void event(std::string_view text) const;
  // Tells hooks_.on_outcome, if set.
  void outcome(std::string_view purgatory, std::string key, std::string_view how, Nanos waited,
               std::string why, std::string text) const;
  // The join phase that just ended, in words, once the next generation started.
  void join_outcome(const GroupMetadata& group, JoinEnd end,
                    const std::vector<std::string>& evicted, Nanos waited) const;
  [[nodiscard]] Nanos now() const { return timer_->clock().now(); }
  [[nodiscard]] bool partition_exists(const std::string& topic, std::int32_t partition) const;

  const GroupConfig config_;
  const GroupCoordinatorHooks hooks_;
  std::shared_ptr<SystemTimer> timer_;
  std::unique_ptr<JoinPurgatory> join_purgatory_;
  std::unique_ptr<HeartbeatPurgatory> heartbeat_purgatory_;
  std::unordered_map<std::string, GroupRef> groups_;
  std::uint64_t next_join_order_ = 0;
  std::uint64_t member_id_state_;  // splitmix64 state for member ids
  bool shut_down_ = false;
  Counters counters_;
};

}  // namespace purgatory::broker
