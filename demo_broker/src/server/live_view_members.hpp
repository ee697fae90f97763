// LiveViewMembers: the consumer-group members the live view's page runs (POST /api/members/start,
// /stop, /freeze and /thaw): InProcessMembers, living in the broker, that join through the same
// GroupCoordinator (and so the same join and heartbeat purgatories) as kcat's; and the groups'
// part of GET /api/state. At most kMaxMembers at once: each costs a timer task and a session in
// the heartbeat purgatory, and a page must not grow the broker without bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "group/group_config.hpp"
#include "group/in_process_member.hpp"
#include "log/log_store.hpp"
#include "observability/status_http_server.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "requests/logger.hpp"

namespace purgatory::broker {

class GroupCoordinator;
struct LiveState;

// Call only from the broker's io thread.
class LiveViewMembers {
 public:
  static constexpr std::size_t kMaxMembers = 16;

  // `groups` bounds the session timeouts a control may ask for. Every reference must outlive it.
  LiveViewMembers(GroupCoordinator& coordinator, std::shared_ptr<SystemTimer> timer, LogStore& log,
                  const GroupConfig& groups, const Logger& logger);

  HttpReply start(const HttpRequest& req);
  // LeaveGroup, then forgotten.
  HttpReply stop(const HttpRequest& req);
  // Stops (freeze) or resumes (thaw) the member's heartbeats.
  HttpReply freeze(const HttpRequest& req, bool freeze);
  // The groups (with the join and heartbeat purgatories' snapshots) and these members.
  void add_to(LiveState& state) const;
  // Forgets every member, sending no LeaveGroup (the coordinator has shut down).
  void clear() noexcept { members_.clear(); }

 private:
  using MemberRef = std::shared_ptr<InProcessMember>;

  GroupCoordinator& coordinator_;
  std::shared_ptr<SystemTimer> timer_;
  LogStore& log_;
  const GroupConfig& groups_;
  const Logger& logger_;
  std::vector<MemberRef> members_;  // destroyed before the coordinator
  std::uint64_t started_ = 0;
};

}  // namespace purgatory::broker
