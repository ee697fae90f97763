// InProcessMember: a consumer-group member living inside the broker, started, stopped and frozen
// from the live view's page.
//
// It takes part in a group the way a consumer does over the wire (JoinGroup, SyncGroup,
// heartbeats, LeaveGroup), through the same GroupCoordinator, so it waits in the same join and
// heartbeat purgatories as a kcat or kafka-python member and can share a group with them. It
// speaks the consumer protocol (type "consumer", assignor "range", one topic subscribed) and,
// when it leads, assigns every member's subscription with Kafka's range assignor. It does not
// fetch: it only holds its partitions.
//
// freeze() makes it stop doing anything, as a stuck process would: it sends no heartbeat and
// ignores the answers it gets, so its session runs out in the heartbeat purgatory and the group
// rebalances without it. thaw() resumes it: it learns it was removed (UNKNOWN_MEMBER_ID) and joins
// again. stop() leaves the group cleanly (LeaveGroup).
//
// Its steps run as tasks on the coordinator's timer (a heartbeat every heartbeat_interval; the
// next request 1 ms after an answer), never inside a coordinator callback, which must not call
// back into the coordinator. Destroying it (or closing the timer) ends it without a LeaveGroup:
// its session then expires as a killed client's would.
//
// Call only from the coordinator's thread. Errors: start() throws std::invalid_argument naming a
// bad config value; the coordinator's error codes end it in Phase::failed with error() saying
// which.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/join_group.hpp"
#include "protocol/topic_partition.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory::broker {

class GroupCoordinator;

// A plain value, thread-compatible.
struct InProcessMemberConfig {
  std::string group_id;
  std::string topic;      // the one topic it subscribes to
  std::string client_id;  // its name; the coordinator starts its member id with it
  std::string client_host = "in-process";
  std::chrono::milliseconds session_timeout{10000};
  std::chrono::milliseconds rebalance_timeout{30000};
  std::chrono::milliseconds heartbeat_interval{1000};
};

class InProcessMember final : public std::enable_shared_from_this<InProcessMember> {
 public:
  // joining: its JoinGroup waits for the join phase (or it is about to send one); syncing: its
  // SyncGroup waits for the leader's assignment; stable: it heartbeats; stopped: it left (or was
  // told to stop); failed: the coordinator refused it (error() says why).
  enum class Phase { joining, syncing, stable, stopped, failed };
  // How many partitions a topic has, for the leader's assignment (0: none).
  using PartitionCount = std::function<std::int32_t(const std::string& topic)>;

  // Creates the member and sends its first JoinGroup. `coordinator` must outlive it; its steps
  // run on `timer`, which must run its tasks on the coordinator's thread. Throws
  // std::invalid_argument for an empty group id, topic or client id, a timeout or interval <= 0,
  // or a heartbeat interval not below the session timeout.
  static std::shared_ptr<InProcessMember> start(GroupCoordinator& coordinator,
                                                std::shared_ptr<SystemTimer> timer,
                                                InProcessMemberConfig config,
                                                PartitionCount partitions);
  // Cancels its next step; sends nothing.
  ~InProcessMember();
  InProcessMember(const InProcessMember&) = delete;
  InProcessMember& operator=(const InProcessMember&) = delete;

  // Leaves the group (LeaveGroup) if it has a member id, and does nothing more. Returns the
  // coordinator's answer: Errc::none, or UNKNOWN_MEMBER_ID when its session had already expired.
  // Idempotent (later calls return Errc::none).
  Errc stop();
  // Stops heartbeating and acting on answers, until thaw(). No effect once stopped or failed.
  void freeze();
  // Resumes: a heartbeat at once if it had a generation, else a JoinGroup.
  void thaw();

  [[nodiscard]] const InProcessMemberConfig& config() const noexcept { return config_; }
  [[nodiscard]] Phase phase() const noexcept { return phase_; }
  [[nodiscard]] bool frozen() const noexcept { return frozen_; }
  // "" until the coordinator gave it one.
  [[nodiscard]] const std::string& member_id() const noexcept { return member_id_; }
  // -1 until it joined a generation.
  [[nodiscard]] std::int32_t generation_id() const noexcept { return generation_id_; }
  // What its latest SyncGroup gave it; emptied when it joins again.
  [[nodiscard]] const std::vector<TopicPartition>& assignment() const noexcept {
    return assignment_;
  }
  [[nodiscard]] std::uint64_t heartbeats() const noexcept { return heartbeats_; }
  // Why it failed; "" otherwise.
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  class Step;
  enum class Next { join, sync, heartbeat };

  InProcessMember(GroupCoordinator& coordinator, std::shared_ptr<SystemTimer> timer,
                  InProcessMemberConfig config, PartitionCount partitions);

  void schedule(Next next, std::chrono::milliseconds delay);
  void on_step();
  void send_join();
  void send_sync();
  void send_heartbeat();
  // The coordinator's callbacks: record, then schedule the next step.
  void on_joined(std::uint64_t attempt, const JoinGroupResponse& response);
  void on_synced(std::uint64_t attempt, const Bytes& assignment, Errc error);
  // Whether an answer to `attempt` is still wanted.
  [[nodiscard]] bool listening(std::uint64_t attempt) const noexcept;
  // Joins again after an error: as a new member when the coordinator forgot it.
  void rejoin(Errc error);
  void fail(Errc error);

  GroupCoordinator& coordinator_;
  const std::shared_ptr<SystemTimer> timer_;
  const InProcessMemberConfig config_;
  const PartitionCount partitions_;
  Ref<Step> step_;
  Next next_ = Next::join;
  Phase phase_ = Phase::joining;
  bool frozen_ = false;
  std::uint64_t attempt_ = 0;  // the JoinGroup or SyncGroup whose answer is awaited
  std::string member_id_;
  std::int32_t generation_id_ = -1;
  std::string leader_id_;
  std::vector<JoinGroupMember> members_;  // the leader's: every member's subscription
  std::vector<TopicPartition> assignment_;
  std::uint64_t heartbeats_ = 0;
  std::string error_;
};

// "joining", "syncing", "stable", "stopped", "failed".
[[nodiscard]] std::string_view to_string(InProcessMember::Phase phase) noexcept;

}  // namespace purgatory::broker
