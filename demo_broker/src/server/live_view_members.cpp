#include "server/live_view_members.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "group/group_coordinator.hpp"
#include "group/group_snapshot.hpp"
#include "observability/live_state.hpp"
#include "server/live_view_http.hpp"

namespace purgatory::broker {

namespace {

using MemberRef = std::shared_ptr<InProcessMember>;

// The in-process member a control names (fields "group" and "member": its name or member id), or
// the answer to give when it names none: 400 for a missing field, 404 for an unknown group or
// member, with the names it could have used.
std::variant<MemberRef, HttpReply> named_member(const std::vector<MemberRef>& members,
                                                const GroupCoordinator& coordinator,
                                                const HttpRequest& req) {
  std::string group;
  std::string name;
  try {
    const RequestFields f = fields(req);
    group = f.required("group");
    name = f.required("member");
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
  std::vector<std::string> in_group;
  for (const MemberRef& m : members) {
    if (m->config().group_id != group) continue;
    if (m->config().client_id == name || m->member_id() == name) return m;
    in_group.push_back(m->config().client_id);
  }
  if (in_group.empty() && !coordinator.has_group(group)) {
    return text_reply(404, fmt::format("unknown group '{}': no member has joined it", group));
  }
  return text_reply(
      404, fmt::format("group '{}' has no in-process member '{}' ({}; the page controls only the "
                       "members it started)",
                       group, name,
                       in_group.empty() ? std::string("it has none")
                                        : fmt::format("it has {}", fmt::join(in_group, ", "))));
}

}  // namespace

LiveViewMembers::LiveViewMembers(GroupCoordinator& coordinator, std::shared_ptr<SystemTimer> timer,
                                 LogStore& log, const GroupConfig& groups, const Logger& logger)
    : coordinator_(coordinator),
      timer_(std::move(timer)),
      log_(log),
      groups_(groups),
      logger_(logger) {}

void LiveViewMembers::add_to(LiveState& s) const {
  // The coordinator lives on this thread: its copy needs no lock, and the two purgatories'
  // snapshots in it hold each shard lock only while they copy.
  s.groups = coordinator_.snapshot(GroupSnapshotLimits{});
  for (const auto& member : members_) {
    LiveMember& lm = s.in_process_members.emplace_back();
    const InProcessMemberConfig& c = member->config();
    lm.name = c.client_id;
    lm.group_id = c.group_id;
    lm.topic = c.topic;
    lm.member_id = member->member_id();
    lm.phase = to_string(member->phase());
    lm.frozen = member->frozen();
    lm.generation_id = member->generation_id();
    lm.assigned = member->assignment();
    lm.heartbeats = member->heartbeats();
    lm.error = member->error();
    lm.session_timeout_ms = c.session_timeout.count();
    lm.heartbeat_interval_ms = c.heartbeat_interval.count();
  }
}

HttpReply LiveViewMembers::start(const HttpRequest& req) {
  InProcessMemberConfig c;
  try {
    const RequestFields f = fields(req);
    c.group_id = f.name("group");
    c.topic = f.name("topic");
    const GroupConfig& g = groups_;
    const std::int64_t session = f.integer(
        "session_timeout_ms", g.min_session_timeout.count(), g.max_session_timeout.count(),
        std::clamp<std::int64_t>(10000, g.min_session_timeout.count(),
                                 g.max_session_timeout.count()));
    c.session_timeout = std::chrono::milliseconds(session);
    c.heartbeat_interval = std::chrono::milliseconds(
        f.integer("heartbeat_interval_ms", 1, std::max<std::int64_t>(session - 1, 1),
                  std::max<std::int64_t>(session / 3, 1)));
    c.rebalance_timeout =
        std::chrono::milliseconds(f.integer("rebalance_timeout_ms", 1, 600000, 30000));
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
  if (members_.size() >= kMaxMembers) {
    return text_reply(429, fmt::format("{} in-process members are running already (at most {}): "
                                       "stop one first",
                                       members_.size(), kMaxMembers));
  }
  c.client_id = fmt::format("live-view-{}", ++started_);
  (void)log_.get_or_create(c.topic);  // as a consumer's Metadata request would
  const auto partitions = [this](const std::string& topic) {
    const std::vector<PartitionLog>* logs = log_.get_or_create(topic);
    return logs == nullptr ? 0 : static_cast<std::int32_t>(logs->size());
  };
  members_.push_back(InProcessMember::start(coordinator_, timer_, c, partitions));
  logger_.event(
      fmt::format("live view: in-process member {} joins group {} (topic {}, session {} ms)",
                  c.client_id, c.group_id, c.topic, c.session_timeout.count()));
  return json_reply(fmt::format(R"({{"ok":true,"member":"{}","group":"{}","topic":"{}"}})",
                                c.client_id, c.group_id, c.topic));
}

HttpReply LiveViewMembers::stop(const HttpRequest& req) {
  auto found = named_member(members_, coordinator_, req);
  if (auto* reply = std::get_if<HttpReply>(&found)) return std::move(*reply);
  const MemberRef m = std::get<MemberRef>(std::move(found));
  const Errc left = m->stop();
  std::erase(members_, m);
  logger_.event(fmt::format("live view: in-process member {} of group {} stopped (LeaveGroup: {})",
                            m->config().client_id, m->config().group_id, errc_name(left)));
  return json_reply(fmt::format(R"({{"ok":true,"member":"{}","leave_group":"{}"}})",
                                m->config().client_id, errc_name(left)));
}

HttpReply LiveViewMembers::freeze(const HttpRequest& req, bool freeze) {
  auto found = named_member(members_, coordinator_, req);
  if (auto* reply = std::get_if<HttpReply>(&found)) return std::move(*reply);
  const MemberRef m = std::get<MemberRef>(std::move(found));
  if (freeze) {
    m->freeze();
  } else {
    m->thaw();
  }
  logger_.event(fmt::format("live view: in-process member {} of group {} {}", m->config().client_id,
                            m->config().group_id,
                            m->frozen() ? "frozen (no more heartbeats)" : "thawed"));
  return json_reply(fmt::format(R"({{"ok":true,"member":"{}","frozen":{}}})", m->config().client_id,
                                m->frozen()));
}

}  // namespace purgatory::broker
