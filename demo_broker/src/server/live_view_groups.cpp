// The live view's group controls: POST /api/members/start, /stop, /freeze and /thaw run
// InProcessMembers, consumer-group members inside the broker that join through the same
// GroupCoordinator (and so the same join and heartbeat purgatories) as kcat's; and the groups'
// part of GET /api/state.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "observability/live_state.hpp"
#include "purgatory/broker/broker.hpp"
#include "purgatory/broker/group_coordinator.hpp"
#include "purgatory/broker/group_snapshot.hpp"
#include "purgatory/broker/in_process_member.hpp"
#include "server/live_view_http.hpp"

namespace purgatory::broker {

namespace {

// Members the page may run at once: each costs a timer task and a session in the heartbeat
// purgatory, and a page must not grow the broker without bound.
constexpr std::size_t kMaxUiMembers = 16;

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

void Broker::add_live_groups(LiveState& s) const {
  // The coordinator lives on this thread: its copy needs no lock, and the two purgatories'
  // snapshots in it hold each shard lock only while they copy.
  s.groups = group_coordinator_->snapshot(GroupSnapshotLimits{});
  for (const auto& member : ui_members_) {
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

HttpReply Broker::ui_member_start(const HttpRequest& req) {
  InProcessMemberConfig c;
  try {
    const RequestFields f = fields(req);
    c.group_id = f.name("group");
    c.topic = f.name("topic");
    const GroupConfig& g = config_.groups;
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
  if (ui_members_.size() >= kMaxUiMembers) {
    return text_reply(429, fmt::format("{} in-process members are running already (at most {}): "
                                       "stop one first",
                                       ui_members_.size(), kMaxUiMembers));
  }
  c.client_id = fmt::format("live-view-{}", ++ui_members_started_);
  (void)log_.get_or_create(c.topic);  // as a consumer's Metadata request would
  const auto partitions = [this](const std::string& topic) {
    const std::vector<PartitionLog>* logs = log_.get_or_create(topic);
    return logs == nullptr ? 0 : static_cast<std::int32_t>(logs->size());
  };
  ui_members_.push_back(InProcessMember::start(*group_coordinator_, timer_, c, partitions));
  event(fmt::format("live view: in-process member {} joins group {} (topic {}, session {} ms)",
                    c.client_id, c.group_id, c.topic, c.session_timeout.count()));
  return json_reply(fmt::format(R"({{"ok":true,"member":"{}","group":"{}","topic":"{}"}})",
                                c.client_id, c.group_id, c.topic));
}

HttpReply Broker::ui_member_stop(const HttpRequest& req) {
  auto found = named_member(ui_members_, *group_coordinator_, req);
  if (auto* reply = std::get_if<HttpReply>(&found)) return std::move(*reply);
  const MemberRef m = std::get<MemberRef>(std::move(found));
  const Errc left = m->stop();
  std::erase(ui_members_, m);
  event(fmt::format("live view: in-process member {} of group {} stopped (LeaveGroup: {})",
                    m->config().client_id, m->config().group_id, errc_name(left)));
  return json_reply(fmt::format(R"({{"ok":true,"member":"{}","leave_group":"{}"}})",
                                m->config().client_id, errc_name(left)));
}

HttpReply Broker::ui_member_freeze(const HttpRequest& req, bool freeze) {
  auto found = named_member(ui_members_, *group_coordinator_, req);
  if (auto* reply = std::get_if<HttpReply>(&found)) return std::move(*reply);
  const MemberRef m = std::get<MemberRef>(std::move(found));
  if (freeze) {
    m->freeze();
  } else {
    m->thaw();
  }
  event(fmt::format("live view: in-process member {} of group {} {}", m->config().client_id,
                    m->config().group_id, m->frozen() ? "frozen (no more heartbeats)" : "thawed"));
  return json_reply(fmt::format(R"({{"ok":true,"member":"{}","frozen":{}}})", m->config().client_id,
                                m->frozen()));
}

}  // namespace purgatory::broker
