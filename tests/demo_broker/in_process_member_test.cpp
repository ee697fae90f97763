// InProcessMember, the live view's consumer-group member, against the real GroupCoordinator on a
// manual clock: two of them split a topic with the range assignor and stay Stable; a frozen one is
// expired by the heartbeat purgatory after its session, not before; a stopped one leaves at once;
// one shares a group with another client and takes the partitions that client's leader gives it;
// a refused one fails with the coordinator's error.
#include "group/in_process_member.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "group/group_snapshot.hpp"
#include "group_test_util.hpp"

using namespace purgatory::broker::group_test;  // NOLINT(google-build-using-namespace)
using Phase = pb::InProcessMember::Phase;
using Member = std::shared_ptr<pb::InProcessMember>;

namespace {

constexpr std::int32_t kHeartbeatMs = 2000;

pb::InProcessMemberConfig member_config(std::string client_id) {
  pb::InProcessMemberConfig c;
  c.group_id = "g";
  c.topic = "orders";
  c.client_id = std::move(client_id);
  c.session_timeout = milliseconds(kSessionMs);
  c.rebalance_timeout = milliseconds(kRebalanceMs);
  c.heartbeat_interval = milliseconds(kHeartbeatMs);
  return c;
}

Member start(Harness& h, pb::InProcessMemberConfig config) {
  return pb::InProcessMember::start(
      *h.coordinator, h.timer, std::move(config),
      [](const std::string& topic) { return topic == "orders" ? 4 : 0; });
}

Member start(Harness& h, const char* client_id) {
  return start(h, member_config(client_id));
}

std::vector<pb::TopicPartition> all_of(std::vector<pb::TopicPartition> a,
                                       const std::vector<pb::TopicPartition>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end(),
            [](const auto& x, const auto& y) { return x.partition < y.partition; });
  return a;
}

const std::vector<pb::TopicPartition> kAllFour{
    {"orders", 0}, {"orders", 1}, {"orders", 2}, {"orders", 3}};

// Two in-process members Stable in one generation, 2 partitions each.
struct TwoMembers {
  Harness h;
  Member one = start(h, "one");
  Member two;

  TwoMembers() {
    h.advance(1000);
    two = start(h, "two");
    h.advance(2 * kInitialDelayMs);  // the delay, restarted once for "two"; then sync
    REQUIRE(one->phase() == Phase::stable);
    REQUIRE(two->phase() == Phase::stable);
  }
};

}  // namespace

TEST_CASE("two in-process members split 4 partitions 2 and 2 and stay Stable over 10 sessions") {
  TwoMembers t;
  CHECK(t.one->generation_id() == 1);
  CHECK(t.two->generation_id() == 1);
  CHECK(t.one->assignment().size() == 2);
  CHECK(t.two->assignment().size() == 2);
  CHECK(all_of(t.one->assignment(), t.two->assignment()) == kAllFour);
  CHECK(t.h.state("g") == "Stable");
  t.h.advance(10 * kSessionMs);
  CHECK(t.one->phase() == Phase::stable);
  CHECK(t.one->generation_id() == 1);
  CHECK(t.two->generation_id() == 1);
  CHECK(t.one->heartbeats() >= 10 * kSessionMs / kHeartbeatMs - 1);
  const pb::GroupCoordinatorStats s = t.h.coordinator->stats();
  CHECK(s.sessions_expired == 0);
  CHECK(s.rebalances == 1);
  CHECK(s.members == 2);
}

TEST_CASE(
    "frozen: the heartbeat purgatory expires it within its 6 s session, the other takes all") {
  TwoMembers t;
  t.two->freeze();
  CHECK(t.two->frozen());
  // Its last heartbeat was at most 2000 ms ago: its session has 4000..6000 ms left.
  t.h.advance(kSessionMs - kHeartbeatMs - 1);
  CHECK(t.h.coordinator->stats().sessions_expired == 0);
  const pb::GroupCoordinatorSnapshot s = t.h.coordinator->snapshot({});
  const auto& members = s.groups.at(0).members;
  const auto frozen = std::find_if(members.begin(), members.end(), [&](const auto& m) {
    return m.member_id == t.two->member_id();
  });
  REQUIRE(frozen != members.end());
  REQUIRE(frozen->session.has_value());
  CHECK(frozen->session->deadline - s.heartbeat.now <= milliseconds(kHeartbeatMs + 1));
  t.h.advance(kHeartbeatMs + 2);
  CHECK(t.h.coordinator->stats().sessions_expired == 1);
  const auto expired = std::find_if(
      t.h.outcomes.begin(), t.h.outcomes.end(),
      [&](const Outcome& o) { return o.purgatory == "heartbeat" && o.outcome == "expired"; });
  REQUIRE(expired != t.h.outcomes.end());
  CHECK(expired->key == "g/" + t.two->member_id());
  CHECK(expired->text.find("expired by the heartbeat purgatory after 6 s without a heartbeat; g "
                           "rebalances") != std::string::npos);
  // The survivor learns of the rebalance from its next heartbeat and rejoins alone.
  t.h.advance(kHeartbeatMs + 10);
  CHECK(t.one->phase() == Phase::stable);
  CHECK(t.one->generation_id() == 2);
  CHECK(t.one->assignment() == kAllFour);
  CHECK(t.two->phase() == Phase::stable);  // it does not know yet: it is frozen

  // Thawed, it finds it was removed (UNKNOWN_MEMBER_ID), joins as a new member, and the two
  // split the topic again.
  const std::string old_id = t.two->member_id();
  t.two->thaw();
  t.h.advance(kRebalanceMs);
  CHECK(t.two->phase() == Phase::stable);
  CHECK(t.two->member_id() != old_id);
  CHECK(t.one->generation_id() == 3);
  CHECK(all_of(t.one->assignment(), t.two->assignment()) == kAllFour);
  CHECK(t.h.coordinator->stats().sessions_expired == 1);
}

TEST_CASE("stop(): LeaveGroup at once, the other takes all 4 within a heartbeat, no expiry") {
  TwoMembers t;
  t.h.advance(500);
  CHECK(t.two->stop() == Errc::none);
  CHECK(t.two->phase() == Phase::stopped);
  CHECK(t.two->stop() == Errc::none);  // idempotent
  CHECK(t.h.state("g") == "PreparingRebalance");
  t.h.advance(kHeartbeatMs + 10);
  CHECK(t.one->generation_id() == 2);
  CHECK(t.one->assignment() == kAllFour);
  const pb::GroupCoordinatorStats s = t.h.coordinator->stats();
  CHECK(s.members_left == 1);
  CHECK(s.sessions_expired == 0);
  CHECK(s.members == 1);
  // Stopped, it sends nothing more: no heartbeat keeps a session of it alive.
  t.h.advance(10 * kSessionMs);
  CHECK(t.h.coordinator->stats().members == 1);
}

TEST_CASE("with another client in the group, it takes what that client's leader assigns it") {
  Harness h;
  const auto leader = h.join("g", "");  // joins first: it leads
  const Member m = start(h, "in-process");
  h.advance(2 * kInitialDelayMs + 5);  // the delay restarted once for it; then its SyncGroup
  REQUIRE(leader->answered());
  const std::string id = leader->resp.member_id;
  REQUIRE(leader->resp.leader == id);
  REQUIRE(leader->resp.members.size() == 2);
  CHECK(leader->resp.protocol_name == "range");
  CHECK(m->phase() == Phase::syncing);  // its SyncGroup waits for the leader's
  const auto synced =
      h.sync("g", leader->resp.generation_id, id,
             {{id, assignment_of({0, 1, 2})}, {m->member_id(), assignment_of({3})}});
  REQUIRE(synced->answered());
  CHECK(m->phase() == Phase::stable);
  CHECK(m->assignment() == std::vector<pb::TopicPartition>{{"orders", 3}});
}

TEST_CASE("refused: a 1000 ms session below the broker's 6000 ms minimum fails it, named") {
  Harness h;
  pb::InProcessMemberConfig c = member_config("short");
  c.session_timeout = milliseconds(1000);
  c.heartbeat_interval = milliseconds(300);
  const Member m = start(h, c);
  h.advance(10);
  CHECK(m->phase() == Phase::failed);
  CHECK(m->error() == "INVALID_SESSION_TIMEOUT");
  CHECK(m->stop() == Errc::none);  // nothing to leave
}

TEST_CASE("refused: a group of another protocol type fails it with INCONSISTENT_GROUP_PROTOCOL") {
  Harness h;
  const auto other = h.join("g", "", false, kSessionMs, {{"x", {}}}, "connect");
  const Member m = start(h, "consumer");
  h.advance(10);
  CHECK(m->phase() == Phase::failed);
  CHECK(m->error() == "INCONSISTENT_GROUP_PROTOCOL");
  CHECK_FALSE(other->answered());
}

TEST_CASE("a member destroyed while its JoinGroup waits is answered into nothing, then expires") {
  Harness h;
  Member m = start(h, "gone");
  h.advance(10);
  m.reset();  // its step is cancelled; the coordinator still holds its parked JoinGroup
  h.advance(kInitialDelayMs);  // answered: the callback finds nobody
  CHECK(h.state("g") == "CompletingRebalance");
  h.advance(kSessionMs);  // it never syncs: its session expires
  CHECK(h.coordinator->stats().sessions_expired == 1);
  CHECK(h.coordinator->stats().members == 0);
}

TEST_CASE("bad configs throw naming the value") {
  Harness h;
  const auto message = [&](pb::InProcessMemberConfig c) -> std::string {
    try {
      start(h, std::move(c));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  pb::InProcessMemberConfig c = member_config("x");
  c.group_id.clear();
  CHECK(message(c).find("group id") != std::string::npos);
  c = member_config("x");
  c.heartbeat_interval = c.session_timeout;
  CHECK(message(c).find("heartbeat interval 6000 ms must be > 0 and below the session timeout "
                        "6000 ms") != std::string::npos);
  CHECK(h.coordinator->stats().groups == 0);
}
