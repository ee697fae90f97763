// What the live view sees of the group coordinator, on a manual clock: GroupCoordinator::
// snapshot() (each group's state, members, partitions, the heartbeat purgatory's session deadline
// and the join purgatory's join-phase deadline, exact to the millisecond) and the outcome lines it
// tells through GroupCoordinatorHooks::on_outcome, each told once.
#include "group/group_snapshot.hpp"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "group_test_util.hpp"

using namespace purgatory::broker::group_test;  // NOLINT(google-build-using-namespace)

namespace {

pb::GroupCoordinatorSnapshot snapshot(const Harness& h, pb::GroupSnapshotLimits limits = {}) {
  return h.coordinator->snapshot(limits);
}

double remaining_ms(Nanos now, const pb::HeartbeatPurgatorySnapshot::Operation& op) {
  return std::chrono::duration<double, std::milli>(op.deadline - now).count();
}

}  // namespace

TEST_CASE(
    "snapshot: a group in its initial delay shows the join phase's 2000 ms left, 1 rejoined") {
  Harness h;
  // Not at clock time 0: the purgatory's snapshot takes an operation watched at 0 for one still
  // being set up, and does not list it.
  h.advance(1);
  const auto a = h.join("g", "");
  h.advance(1000);
  const pb::GroupCoordinatorSnapshot s = snapshot(h);
  CHECK(s.groups_total == 1);
  REQUIRE(s.groups.size() == 1);
  const pb::GroupSnapshot& g = s.groups[0];
  CHECK(g.group_id == "g");
  CHECK(g.state == pb::GroupState::preparing_rebalance);
  CHECK(g.generation_id == 0);
  CHECK(g.protocol_type == "consumer");
  CHECK(g.protocol.empty());  // chosen when the generation starts
  CHECK(g.initial_join_phase);
  REQUIRE(g.join_phase.has_value());
  CHECK(g.join_phase->deadline - s.join.now == milliseconds(kInitialDelayMs - 1000));
  CHECK(g.join_phase->timeout == milliseconds(kInitialDelayMs));
  CHECK(g.members_total == 1);
  CHECK(g.members_rejoined == 1);
  REQUIRE(g.members.size() == 1);
  CHECK(g.members[0].awaiting_join);
  CHECK(g.members[0].is_new);
  CHECK(g.members[0].client_host == "/127.0.0.1");
  // A new member's session is the new-member join timeout (5 min), not its own 6 s.
  REQUIRE(g.members[0].session.has_value());
  CHECK(g.members[0].session->timeout == std::chrono::minutes(5));
  CHECK(s.join.keys_total == 1);
  CHECK_FALSE(a->answered());
}

TEST_CASE("snapshot: Stable members show their partitions and sessions counting down from 6 s") {
  StableGroup sg;
  Harness& h = sg.h;
  h.advance(1000);
  CHECK(h.heartbeat("g", sg.generation, sg.a) == Errc::none);
  h.advance(500);
  const pb::GroupCoordinatorSnapshot s = snapshot(h);
  REQUIRE(s.groups.size() == 1);
  const pb::GroupSnapshot& g = s.groups[0];
  CHECK(g.state == pb::GroupState::stable);
  CHECK(g.generation_id == sg.generation);
  CHECK(g.protocol == "range");
  CHECK(g.leader_id == sg.a);
  CHECK_FALSE(g.join_phase.has_value());
  REQUIRE(g.members.size() == 2);
  const pb::GroupMemberSnapshot& a = g.members[0];  // join order: a first
  const pb::GroupMemberSnapshot& b = g.members[1];
  CHECK(a.member_id == sg.a);
  CHECK(a.is_leader);
  CHECK_FALSE(b.is_leader);
  CHECK(a.assigned == std::vector<pb::TopicPartition>{{"orders", 0}, {"orders", 1}});
  CHECK(b.assigned == std::vector<pb::TopicPartition>{{"orders", 2}, {"orders", 3}});
  REQUIRE(a.session.has_value());
  REQUIRE(b.session.has_value());
  CHECK(remaining_ms(s.heartbeat.now, *a.session) == doctest::Approx(kSessionMs - 500));
  CHECK(remaining_ms(s.heartbeat.now, *b.session) == doctest::Approx(kSessionMs - 1500));
  CHECK(s.heartbeat.keys_total == 2);
  // The initial delay, extended once, then over: a heartbeat tells nothing.
  CHECK(h.outcomes.size() == 2);
}

TEST_CASE(
    "a rebalance: the join phase waits for b until b's session expires at 6000 ms, in words") {
  StableGroup sg;
  Harness& h = sg.h;
  h.outcomes.clear();
  h.advance(1000);
  CHECK(h.heartbeat("g", sg.generation, sg.a) == Errc::none);
  const auto rejoin = h.join("g", sg.a);  // the leader rejoins: a rebalance
  pb::GroupCoordinatorSnapshot s = snapshot(h);
  REQUIRE(s.groups.size() == 1);
  {
    const pb::GroupSnapshot& g = s.groups[0];
    CHECK(g.state == pb::GroupState::preparing_rebalance);
    CHECK_FALSE(g.initial_join_phase);
    REQUIRE(g.join_phase.has_value());
    CHECK(g.join_phase->deadline - s.join.now == milliseconds(kRebalanceMs));
    CHECK(g.members_rejoined == 1);
    CHECK(g.members[0].awaiting_join);        // a rejoined
    CHECK_FALSE(g.members[1].awaiting_join);  // the join purgatory waits for b
  }
  h.advance(kSessionMs - 1000 - 1);  // b's session started at the sync, 1000 ms before the rejoin
  CHECK(h.outcomes.empty());
  h.advance(1);
  REQUIRE(h.outcomes.size() == 2);
  CHECK(h.outcomes[0].purgatory == "heartbeat");
  CHECK(h.outcomes[0].outcome == "expired");
  CHECK(h.outcomes[0].key == "g/" + sg.b);
  CHECK(h.outcomes[0].waited == milliseconds(kSessionMs));
  CHECK(h.outcomes[0].text == "member " + sg.b +
                                  " of g expired by the heartbeat purgatory after 6 s without a "
                                  "heartbeat; g's join phase no longer waits for it");
  CHECK(h.outcomes[1].purgatory == "join");
  CHECK(h.outcomes[1].outcome == "completed");
  CHECK(h.outcomes[1].key == "g");
  CHECK(h.outcomes[1].text ==
        "join phase of g completed after 5 s: every member rejoined; "
        "generation 2 starts with 1 member(s), leader " +
            sg.a);
  REQUIRE(rejoin->answered());
  s = snapshot(h);
  CHECK(s.groups[0].state == pb::GroupState::completing_rebalance);
  CHECK(s.groups[0].members_total == 1);
}

TEST_CASE("the rebalance timeout: a member heartbeating but not rejoining is evicted at 10 s") {
  Harness h;
  constexpr std::int32_t kLongSessionMs = 30000;  // longer than the rebalance timeout
  const auto ja = h.join("g", "", false, kLongSessionMs);
  const auto jb = h.join("g", "", false, kLongSessionMs);
  h.advance(2 * kInitialDelayMs);
  REQUIRE(jb->answered());
  const std::string a = ja->resp.member_id;
  const std::string b = jb->resp.member_id;
  const std::int32_t gen = ja->resp.generation_id;
  REQUIRE(
      h.sync("g", gen, a, {{a, assignment_of({0, 1})}, {b, assignment_of({2, 3})}})->answered());
  REQUIRE(h.sync("g", gen, b)->answered());
  h.outcomes.clear();
  const auto rejoin = h.join("g", a);
  for (int i = 0; i < 9; ++i) {
    h.advance(1000);
    CHECK(h.heartbeat("g", gen, b) == Errc::rebalance_in_progress);  // b stays alive
  }
  h.advance(kRebalanceMs - 9000);
  REQUIRE(rejoin->answered());
  REQUIRE(h.outcomes.size() == 1);
  const Outcome& o = h.outcomes[0];
  CHECK(o.purgatory == "join");
  CHECK(o.outcome == "expired");
  CHECK(o.why == "rebalance timeout: 1 member(s) evicted");
  CHECK(o.waited == milliseconds(kRebalanceMs));
  CHECK(o.text == "join phase of g expired after 10 s (the rebalance timeout): " + b +
                      " did not rejoin and is evicted; generation 2 starts with 1 member(s), "
                      "leader " +
                      a);
}

TEST_CASE("the initial delay, restarted once for a newcomer, told as two 'delay over' lines") {
  Harness h;
  const auto ja = h.join("g", "");
  h.advance(1000);
  const auto jb = h.join("g", "");
  h.advance(kInitialDelayMs - 1000);  // t = 3000: the first delay is over
  REQUIRE(h.outcomes.size() == 1);
  CHECK(h.outcomes[0].outcome == "delay over");
  CHECK(h.outcomes[0].text ==
        "initial rebalance delay of g over after 3 s, but a member joined "
        "meanwhile: the join purgatory waits 3 s more");
  const pb::GroupCoordinatorSnapshot s = snapshot(h);
  REQUIRE(s.groups[0].join_phase.has_value());
  CHECK(s.groups[0].join_phase->deadline - s.join.now == milliseconds(kInitialDelayMs));
  h.advance(kInitialDelayMs);
  REQUIRE(ja->answered());
  REQUIRE(h.outcomes.size() == 2);
  CHECK(h.outcomes[1].outcome == "delay over");
  CHECK(h.outcomes[1].text ==
        "join phase of g ended after the initial rebalance delay (3 s); "
        "generation 1 starts with 2 member(s), leader " +
            ja->resp.member_id);
}

TEST_CASE("LeaveGroup: told as the heartbeat purgatory completing the session after 1.5 s") {
  StableGroup sg;
  Harness& h = sg.h;
  h.outcomes.clear();
  h.advance(1500);
  REQUIRE(h.coordinator->leave_group({"g", sg.b}) == Errc::none);
  REQUIRE(h.outcomes.size() == 1);
  CHECK(h.outcomes[0].purgatory == "heartbeat");
  CHECK(h.outcomes[0].outcome == "completed");
  CHECK(h.outcomes[0].why == "LeaveGroup");
  CHECK(h.outcomes[0].text == "member " + sg.b +
                                  " of g left (LeaveGroup): the heartbeat purgatory completed its "
                                  "session after 1.5 s; g rebalances");
  CHECK(h.coordinator->leave_group({"g", sg.a}) == Errc::none);
  REQUIRE(h.outcomes.size() == 3);  // a's leave, then the join phase with nobody left
  CHECK(h.outcomes[1].text.ends_with("g has no member left"));
  CHECK(h.outcomes[2].text ==
        "join phase of g completed after 0 ms: no member left to wait for; "
        "g is Empty (generation 2)");
}

TEST_CASE("a MEMBER_ID_REQUIRED id never used expires after the 6 s session, in words") {
  Harness h;
  const auto asked = h.join("g", "", true);
  REQUIRE(asked->resp.error_code == Errc::member_id_required);
  CHECK(snapshot(h).groups.at(0).pending_members == 1);
  h.advance(kSessionMs);
  REQUIRE(h.outcomes.size() == 1);
  CHECK(h.outcomes[0].text == "member id " + asked->resp.member_id +
                                  " of g (MEMBER_ID_REQUIRED) expired by the heartbeat purgatory "
                                  "after 6 s unused: forgotten");
  CHECK(snapshot(h).groups_total == 0);
}

TEST_CASE("snapshot limits: 3 groups of 2 members, at most 2 groups and 1 member each listed") {
  Harness h;
  for (const char* group : {"c", "a", "b"}) {
    h.join(group, "");
    h.join(group, "");
  }
  const pb::GroupCoordinatorSnapshot s = snapshot(h, {2, 1, 1024});
  CHECK(s.groups_total == 3);
  REQUIRE(s.groups.size() == 2);
  CHECK(s.groups[0].group_id == "a");  // by id
  CHECK(s.groups[1].group_id == "b");
  CHECK(s.groups[0].members_total == 2);
  CHECK(s.groups[0].members_rejoined == 2);
  CHECK(s.groups[0].members.size() == 1);
  CHECK(s.heartbeat.keys_total == 6);
}
