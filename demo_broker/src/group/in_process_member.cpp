#include "group/in_process_member.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "group/group_coordinator.hpp"
#include "protocol/consumer_protocol.hpp"

namespace purgatory::broker {

namespace {

using std::chrono::milliseconds;

// How soon the next request follows an answer: the next tick, outside the coordinator's callback.
constexpr milliseconds kSoon{1};

InProcessMemberConfig checked(InProcessMemberConfig c) {
  const auto require = [](bool ok, std::string_view what) {
    if (!ok) throw std::invalid_argument(fmt::format("in-process member: {}", what));
  };
  require(!c.group_id.empty(), "the group id is empty");
  require(!c.topic.empty(), "the topic is empty");
  require(!c.client_id.empty(), "the client id is empty");
  require(c.session_timeout.count() > 0 && c.rebalance_timeout.count() > 0,
          fmt::format("timeouts must be > 0 ms (session {} ms, rebalance {} ms)",
                      c.session_timeout.count(), c.rebalance_timeout.count()));
  require(c.heartbeat_interval.count() > 0 && c.heartbeat_interval < c.session_timeout,
          fmt::format("heartbeat interval {} ms must be > 0 and below the session timeout {} ms",
                      c.heartbeat_interval.count(), c.session_timeout.count()));
  return c;
}

}  // namespace

// The member's next step, on the timer. Holds the member weakly: a member destroyed while its
// step waits is simply not run.
class InProcessMember::Step final : public TimerTask {
 public:
  explicit Step(std::weak_ptr<InProcessMember> member) : member_(std::move(member)) {}

 private:
  void run() override {
    if (const auto member = member_.lock()) member->on_step();
  }
  std::weak_ptr<InProcessMember> member_;
};

std::string_view to_string(InProcessMember::Phase phase) noexcept {
  switch (phase) {
    case InProcessMember::Phase::joining:
      return "joining";
    case InProcessMember::Phase::syncing:
      return "syncing";
    case InProcessMember::Phase::stable:
      return "stable";
    case InProcessMember::Phase::stopped:
      return "stopped";
    case InProcessMember::Phase::failed:
      return "failed";
  }
  return "unknown";
}

InProcessMember::InProcessMember(GroupCoordinator& coordinator, std::shared_ptr<SystemTimer> timer,
                                 InProcessMemberConfig config, PartitionCount partitions)
    : coordinator_(coordinator),
      timer_(std::move(timer)),
      config_(checked(std::move(config))),
      partitions_(std::move(partitions)) {
  if (!timer_) throw std::invalid_argument("in-process member: the timer is null");
  if (!partitions_) {
    throw std::invalid_argument("in-process member: the partition count function is null");
  }
}

std::shared_ptr<InProcessMember> InProcessMember::start(GroupCoordinator& coordinator,
                                                        std::shared_ptr<SystemTimer> timer,
                                                        InProcessMemberConfig config,
                                                        PartitionCount partitions) {
  std::shared_ptr<InProcessMember> member(
      new InProcessMember(coordinator, std::move(timer), std::move(config), std::move(partitions)));
  member->step_ = make_task<Step>(member);
  member->send_join();
  return member;
}

InProcessMember::~InProcessMember() {
  if (step_) step_->cancel();
}

Errc InProcessMember::stop() {
  if (phase_ == Phase::stopped) return Errc::none;
  const bool leave = !member_id_.empty() && phase_ != Phase::failed;
  phase_ = Phase::stopped;
  ++attempt_;  // a parked JoinGroup answered by the LeaveGroup below is not wanted any more
  step_->cancel();
  return leave ? coordinator_.leave_group({config_.group_id, member_id_}) : Errc::none;
}

void InProcessMember::freeze() {
  if (phase_ == Phase::stopped || phase_ == Phase::failed) return;
  frozen_ = true;
  step_->cancel();
}

void InProcessMember::thaw() {
  if (!frozen_) return;
  frozen_ = false;
  if (phase_ == Phase::stable) {
    send_heartbeat();
  } else {
    send_join();
  }
}

void InProcessMember::schedule(Next next, milliseconds delay) {
  next_ = next;
  try {
    timer_->add(step_, delay);
  } catch (const TimerRejected&) {
    phase_ = Phase::stopped;  // the broker is stopping
  }
}

void InProcessMember::on_step() {
  if (frozen_ || phase_ == Phase::stopped || phase_ == Phase::failed) return;
  switch (next_) {
    case Next::join:
      send_join();
      break;
    case Next::sync:
      send_sync();
      break;
    case Next::heartbeat:
      send_heartbeat();
      break;
  }
}

bool InProcessMember::listening(std::uint64_t attempt) const noexcept {
  // A frozen member ignores its answers, as a stuck process leaves them unread.
  return attempt == attempt_ && !frozen_ && phase_ != Phase::stopped && phase_ != Phase::failed;
}

void InProcessMember::send_join() {
  phase_ = Phase::joining;
  assignment_.clear();  // the eager protocol: a member gives its partitions up when it rejoins
  JoinGroupRequest req;
  req.group_id = config_.group_id;
  req.session_timeout_ms = static_cast<std::int32_t>(config_.session_timeout.count());
  req.rebalance_timeout_ms = static_cast<std::int32_t>(config_.rebalance_timeout.count());
  req.member_id = member_id_;
  req.protocol_type = "consumer";
  req.protocols = {{"range", encode_subscription({0, {config_.topic}, std::nullopt})}};
  const JoinContext ctx{true, config_.client_id, config_.client_host};
  const std::uint64_t attempt = ++attempt_;
  coordinator_.join_group(
      req, ctx, [weak = weak_from_this(), attempt](const JoinGroupResponse& r, std::string_view) {
        if (const auto self = weak.lock()) self->on_joined(attempt, r);
      });
}

void InProcessMember::on_joined(std::uint64_t attempt, const JoinGroupResponse& r) {
  if (!listening(attempt)) return;
  switch (r.error_code) {
    case Errc::none:
      member_id_ = r.member_id;
      generation_id_ = r.generation_id;
      leader_id_ = r.leader;
      members_ = r.members;
      schedule(Next::sync, kSoon);
      return;
    case Errc::member_id_required:
      member_id_ = r.member_id;  // KIP-394: join again with it
      schedule(Next::join, kSoon);
      return;
    default:
      rejoin(r.error_code);
      return;
  }
}

void InProcessMember::send_sync() {
  phase_ = Phase::syncing;
  SyncGroupRequest req{config_.group_id, generation_id_, member_id_, {}};
  if (leader_id_ == member_id_) req.assignments = range_assign(members_, partitions_);
  const std::uint64_t attempt = ++attempt_;
  coordinator_.sync_group(
      req, [weak = weak_from_this(), attempt](const SyncGroupResponse& r, std::string_view) {
        if (const auto self = weak.lock()) self->on_synced(attempt, r.assignment, r.error_code);
      });
}

void InProcessMember::on_synced(std::uint64_t attempt, const Bytes& assignment, Errc error) {
  if (!listening(attempt)) return;
  if (error != Errc::none) return rejoin(error);
  assignment_.clear();
  if (!assignment.empty()) {
    try {
      for (const AssignedTopic& t : decode_assignment(assignment).topics) {
        for (const std::int32_t p : t.partitions)
          assignment_.push_back({t.topic, p});
      }
    } catch (const DecodeError&) {
      // The leader is not a consumer speaking this protocol: hold nothing.
    }
  }
  phase_ = Phase::stable;
  schedule(Next::heartbeat, config_.heartbeat_interval);
}

void InProcessMember::send_heartbeat() {
  const Errc error = coordinator_.heartbeat({config_.group_id, generation_id_, member_id_});
  if (error == Errc::none) {
    ++heartbeats_;
    schedule(Next::heartbeat, config_.heartbeat_interval);
    return;
  }
  rejoin(error);
}

void InProcessMember::rejoin(Errc error) {
  switch (error) {
    case Errc::unknown_member_id:
      member_id_.clear();  // forgotten (its session expired): join as a new member
      generation_id_ = -1;
      break;
    case Errc::rebalance_in_progress:  // the group rebalances: join the new generation
    case Errc::illegal_generation:     // it missed a generation
      break;
    default:
      return fail(error);
  }
  phase_ = Phase::joining;
  assignment_.clear();
  if (!frozen_) schedule(Next::join, kSoon);
}

void InProcessMember::fail(Errc error) {
  phase_ = Phase::failed;
  error_ = errc_name(error);
  step_->cancel();
}

}  // namespace purgatory::broker
