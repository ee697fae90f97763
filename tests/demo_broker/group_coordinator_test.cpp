// The group coordinator's state machine on a manual clock, without sockets: the join purgatory
// (every member rejoining, the rebalance timeout evicting, the initial delay), the heartbeat
// purgatory (session expiry), and Kafka's errors for stale generations, unknown members and bad
// joins. Time only moves when a test advances it, so every deadline is exact. Each test checks
// the outcomes it caused are counted, and every parked JoinGroup/SyncGroup is answered once.
#include "group/group_coordinator.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "group_test_util.hpp"
#include "protocol/consumer_protocol.hpp"

using namespace purgatory::broker::group_test;  // NOLINT(google-build-using-namespace)

TEST_CASE("the initial delay: a lone member waits exactly 3000 ms, then leads generation 1") {
  Harness h;
  const auto j = h.join("g", "");
  h.advance(kInitialDelayMs - 1);
  CHECK_FALSE(j->answered());
  CHECK(h.state("g") == "PreparingRebalance");
  CHECK(h.coordinator->join_metrics().delayed == 1);
  h.advance(1);
  REQUIRE(j->answered());
  CHECK(j->resp.error_code == Errc::none);
  CHECK(j->resp.generation_id == 1);
  CHECK(j->resp.leader == j->resp.member_id);
  CHECK(j->resp.protocol_name == "range");
  REQUIRE(j->resp.members.size() == 1);  // the leader gets every member's subscription
  CHECK(pb::decode_subscription(j->resp.members[0].metadata).topics ==
        std::vector<std::string>{"orders"});
  CHECK(h.state("g") == "CompletingRebalance");
  const pb::GroupCoordinatorStats s = h.coordinator->stats();
  CHECK(s.rebalances == 1);
  CHECK(s.initial_joins == 1);
  CHECK(s.initial_delays_extended == 0);
  CHECK(s.generations == 1);
  CHECK(s.groups == 1);
  CHECK(s.members == 1);
  // An InitialDelayedJoin never completes early: the purgatory counts it expired.
  CHECK(h.coordinator->join_metrics().expired_total == 1);
  CHECK(h.coordinator->join_metrics().completed_total == 0);
}

TEST_CASE(
    "the initial delay restarts for a second member: both answered at 6000 ms, one "
    "generation") {
  Harness h;
  const auto first = h.join("g", "");
  h.advance(1000);
  const auto second = h.join("g", "");
  h.advance(kInitialDelayMs - 1000);  // t = 3000: the first delay is over, a member came
  CHECK_FALSE(first->answered());
  CHECK(h.saw("a member joined meanwhile: waiting 3000 ms more"));
  h.advance(kInitialDelayMs - 1);  // t = 5999
  CHECK_FALSE(first->answered());
  h.advance(1);  // t = 6000
  REQUIRE(first->answered());
  REQUIRE(second->answered());
  CHECK(first->resp.generation_id == 1);
  CHECK(second->resp.generation_id == 1);
  CHECK(first->resp.leader == first->resp.member_id);  // the first to join leads
  CHECK(second->resp.leader == first->resp.member_id);
  CHECK(first->resp.members.size() == 2);
  CHECK(second->resp.members.empty());  // followers get no subscriptions
  const pb::GroupCoordinatorStats s = h.coordinator->stats();
  CHECK(s.initial_delays_extended == 1);
  CHECK(s.initial_joins == 1);
  CHECK(s.generations == 1);
  CHECK(h.coordinator->join_metrics().expired_total == 2);
}

TEST_CASE(
    "the initial delay stops at the rebalance timeout: 3000 ms + 1000 ms when it is "
    "4000 ms") {
  Harness h;
  pb::JoinGroupRequest req{"g", kSessionMs, 4000, "", "consumer", {{"range", {}}}};
  std::vector<pb::JoinGroupResponse> answers;
  const auto collect = [&answers](const pb::JoinGroupResponse& r, std::string_view) {
    answers.push_back(r);
  };
  h.coordinator->join_group(req, {false, "c", "/h"}, collect);
  h.advance(500);
  h.coordinator->join_group(req, {false, "c", "/h"}, collect);
  h.advance(kInitialDelayMs - 500 + 999);  // t = 3999
  CHECK(answers.empty());
  h.advance(1);  // t = 4000: the extension was min(3000, 4000 - 3000) = 1000 ms
  CHECK(answers.size() == 2);
}

TEST_CASE(
    "join with all members: a rebalance completes as soon as both old members rejoin, "
    "long before the 10000 ms rebalance timeout") {
  StableGroup g;
  Harness& h = g.h;
  const auto c = h.join("g", "");  // a third member: the group rebalances
  CHECK(h.state("g") == "PreparingRebalance");
  CHECK_FALSE(c->answered());
  CHECK(h.heartbeat("g", g.generation, g.a) == Errc::rebalance_in_progress);
  h.advance(100);
  const auto ra = h.join("g", g.a);
  CHECK_FALSE(ra->answered());  // b has not rejoined yet
  h.advance(100);
  const auto rb = h.join("g", g.b);  // the last one: the DelayedJoin completes at once
  REQUIRE(ra->answered());
  REQUIRE(rb->answered());
  REQUIRE(c->answered());
  CHECK(ra->resp.generation_id == g.generation + 1);
  CHECK(ra->resp.leader == g.a);
  CHECK(ra->resp.members.size() == 3);
  CHECK(ra->how == "join phase completed: every member rejoined");
  CHECK(h.coordinator->stats().joins_completed == 1);
  CHECK(h.coordinator->stats().joins_expired == 0);
  CHECK(h.coordinator->join_metrics().completed_total == 1);
  CHECK(h.coordinator->join_metrics().delayed == 0);
  // The new generation settles when the leader hands out the assignment.
  const std::int32_t gen = ra->resp.generation_id;
  const auto sb = h.sync("g", gen, g.b);
  const auto sc = h.sync("g", gen, c->resp.member_id);
  CHECK_FALSE(sb->answered());  // followers wait for the leader's SyncGroup
  const auto sa = h.sync("g", gen, g.a,
                         {{g.a, assignment_of({0, 1})},
                          {g.b, assignment_of({2})},
                          {c->resp.member_id, assignment_of({3})}});
  REQUIRE(sb->answered());
  REQUIRE(sc->answered());
  CHECK(sa->resp.assignment == assignment_of({0, 1}));
  CHECK(sb->resp.assignment == assignment_of({2}));
  CHECK(sc->resp.assignment == assignment_of({3}));
  CHECK(h.state("g") == "Stable");
}

TEST_CASE(
    "join timing out and evicting: a member that keeps heartbeating but never rejoins "
    "is evicted when the 10000 ms rebalance timeout expires") {
  StableGroup g;
  Harness& h = g.h;
  const auto ra = h.join("g", g.a);  // the leader rejoins: Kafka rebalances for it
  CHECK(h.state("g") == "PreparingRebalance");
  for (int t = 0; t < 4; ++t) {  // b's heartbeat thread lives on (t = 2000 .. 8000)
    h.advance(2000);
    CHECK(h.heartbeat("g", g.generation, g.b) == Errc::rebalance_in_progress);
  }
  h.advance(kRebalanceMs - 8000 - 1);  // t = 9999
  CHECK_FALSE(ra->answered());
  h.advance(1);  // t = 10000: the DelayedJoin expires
  REQUIRE(ra->answered());
  CHECK(ra->resp.error_code == Errc::none);
  CHECK(ra->resp.generation_id == g.generation + 1);
  CHECK(ra->resp.members.size() == 1);
  CHECK(ra->how == "join phase expired after the rebalance timeout (10000 ms)");
  CHECK(h.saw("member " + g.b + " did not rejoin before the join phase ended: evicted"));
  const pb::GroupCoordinatorStats s = h.coordinator->stats();
  CHECK(s.members_evicted == 1);
  CHECK(s.joins_expired == 1);
  CHECK(s.members == 1);
  CHECK(h.coordinator->join_metrics().expired_total >= 1);
  // b finds out it is gone.
  CHECK(h.heartbeat("g", g.generation, g.b) == Errc::unknown_member_id);
  CHECK(h.heartbeat("g", g.generation + 1, g.b) == Errc::unknown_member_id);
}

TEST_CASE(
    "heartbeat expiry: a member silent for its 6000 ms session is expired by the "
    "heartbeat purgatory and the other takes every partition") {
  StableGroup g;
  Harness& h = g.h;
  const auto expired_before = h.coordinator->heartbeat_metrics().expired_total;
  // a heartbeats every 2000 ms; b's last sign of life was its SyncGroup at t = 0.
  for (int i = 0; i < 2; ++i) {
    h.advance(2000);
    CHECK(h.heartbeat("g", g.generation, g.a) == Errc::none);
  }
  h.advance(kSessionMs - 4000 - 1);  // t = 5999: b is still a member
  CHECK(h.describe("g").members.size() == 2);
  h.advance(1);  // t = 6000
  CHECK(h.saw("member " + g.b + " sent no heartbeat within its session timeout (6000 ms)"));
  CHECK(h.coordinator->stats().sessions_expired == 1);
  CHECK(h.coordinator->heartbeat_metrics().expired_total == expired_before + 1);
  CHECK(h.state("g") == "PreparingRebalance");
  CHECK(h.heartbeat("g", g.generation, g.a) == Errc::rebalance_in_progress);
  const auto ra = h.join("g", g.a);  // the only member left: completes at once
  REQUIRE(ra->answered());
  CHECK(ra->resp.generation_id == g.generation + 1);
  CHECK(ra->resp.leader == g.a);
  REQUIRE(ra->resp.members.size() == 1);
  const auto sa = h.sync("g", ra->resp.generation_id, g.a, {{g.a, assignment_of({0, 1, 2, 3})}});
  CHECK(sa->resp.assignment == assignment_of({0, 1, 2, 3}));
  CHECK(h.state("g") == "Stable");
  CHECK(h.heartbeat("g", g.generation, g.b) == Errc::unknown_member_id);
  // While heartbeats keep coming, nobody else expires.
  for (int i = 0; i < 10; ++i) {
    h.advance(5000);
    CHECK(h.heartbeat("g", ra->resp.generation_id, g.a) == Errc::none);
  }
  CHECK(h.coordinator->stats().sessions_expired == 1);
}

TEST_CASE("a client that vanishes mid-rebalance is expired by its session, not waited for") {
  StableGroup g;
  Harness& h = g.h;
  const auto ra = h.join("g", g.a);
  const auto rb = h.join("g", g.b);  // b rejoins, then its process dies: no sync, no heartbeat
  REQUIRE(rb->answered());
  const std::int32_t gen = ra->resp.generation_id;
  const auto sa =
      h.sync("g", gen, g.a, {{g.a, assignment_of({0, 1})}, {g.b, assignment_of({2, 3})}});
  REQUIRE(sa->answered());
  for (int i = 0; i < 2; ++i) {
    h.advance(2000);
    CHECK(h.heartbeat("g", gen, g.a) == Errc::none);
  }
  CHECK(h.coordinator->stats().sessions_expired == 0);
  h.advance(kSessionMs - 4000);  // b's session, running since its join was answered, lapses
  CHECK(h.coordinator->stats().sessions_expired == 1);
  CHECK(h.state("g") == "PreparingRebalance");
  CHECK(h.heartbeat("g", gen, g.a) == Errc::rebalance_in_progress);
  const auto again = h.join("g", g.a);
  REQUIRE(again->answered());
  CHECK(again->resp.members.size() == 1);
}

TEST_CASE("a follower waiting in SyncGroup when the leader vanishes is told to rejoin") {
  StableGroup g;
  Harness& h = g.h;
  const auto ra = h.join("g", g.a);
  const auto rb = h.join("g", g.b);
  const std::int32_t gen = ra->resp.generation_id;
  const auto sb = h.sync("g", gen, g.b);  // waits for the leader, who never syncs
  CHECK_FALSE(sb->answered());
  h.advance(kSessionMs);  // the leader's session lapses; b's does not (it waits in sync)
  REQUIRE(sb->answered());
  CHECK(sb->resp.error_code == Errc::rebalance_in_progress);
  CHECK(h.coordinator->stats().sessions_expired == 1);
  const auto rb2 = h.join("g", g.b);
  REQUIRE(rb2->answered());
  CHECK(rb2->resp.leader == g.b);  // the leadership passed on
  CHECK(rb2->resp.generation_id == gen + 1);
}

TEST_CASE("stale generation and unknown members get Kafka's error codes") {
  StableGroup g;
  Harness& h = g.h;
  const std::int32_t stale = g.generation - 1;
  CHECK(h.heartbeat("g", stale, g.a) == Errc::illegal_generation);
  CHECK(h.heartbeat("g", g.generation, "nobody") == Errc::unknown_member_id);
  CHECK(h.heartbeat("no-such-group", 1, g.a) == Errc::unknown_member_id);
  CHECK(h.heartbeat("", 1, g.a) == Errc::invalid_group_id);
  CHECK(h.sync("g", stale, g.a)->resp.error_code == Errc::illegal_generation);
  CHECK(h.sync("g", g.generation, "nobody")->resp.error_code == Errc::unknown_member_id);
  CHECK(h.join("g", "nobody")->resp.error_code == Errc::unknown_member_id);
  CHECK(h.join("no-such-group", "somebody")->resp.error_code == Errc::unknown_member_id);

  const auto commit = [&](std::int32_t generation, const std::string& member,
                          const std::string& group = "g") {
    pb::OffsetCommitRequest req{group, generation, member, -1, {{"orders", {{0, 5, -1, -1, {}}}}}};
    return h.coordinator->commit_offsets(req).topics.at(0).partitions.at(0).error_code;
  };
  CHECK(commit(stale, g.a) == Errc::illegal_generation);
  CHECK(commit(g.generation, "nobody") == Errc::unknown_member_id);
  CHECK(commit(-1, "") == Errc::unknown_member_id);  // only members commit to an active group
  CHECK(commit(3, "somebody", "no-such-group") == Errc::illegal_generation);
  CHECK(commit(g.generation, g.a) == Errc::none);
  // A rebalance in progress: heartbeats say so, a member still in the old generation can commit.
  const auto ra = h.join("g", g.a);
  CHECK(h.heartbeat("g", g.generation, g.b) == Errc::rebalance_in_progress);
  CHECK(commit(g.generation, g.b) == Errc::none);
  const auto rb = h.join("g", g.b);
  REQUIRE(rb->answered());
  // CompletingRebalance: the member has a generation but no assignment yet.
  CHECK(commit(rb->resp.generation_id, g.b) == Errc::rebalance_in_progress);
  CHECK(h.sync("g", rb->resp.generation_id + 1, g.b)->resp.error_code == Errc::illegal_generation);
  // Nothing here closed anything: the group carries on.
  CHECK(h.sync("g", ra->resp.generation_id, g.a, {})->resp.error_code == Errc::none);
  CHECK(h.state("g") == "Stable");
  CHECK(h.coordinator->stats().offsets_committed == 2);
}

TEST_CASE("leave during rebalance: the join phase stops waiting for the member that left") {
  StableGroup g;
  Harness& h = g.h;
  const auto c = h.join("g", "");  // a third member starts a rebalance
  const auto ra = h.join("g", g.a);
  CHECK_FALSE(ra->answered());
  CHECK(h.coordinator->leave_group({"g", g.b}) == Errc::none);  // b leaves instead of rejoining
  REQUIRE(ra->answered());
  REQUIRE(c->answered());
  CHECK(ra->resp.generation_id == g.generation + 1);
  CHECK(ra->resp.members.size() == 2);
  CHECK(ra->how == "join phase completed: every member rejoined");
  CHECK(h.coordinator->stats().members_left == 1);
  CHECK(h.coordinator->stats().members_evicted == 0);
  CHECK(h.coordinator->leave_group({"g", g.b}) == Errc::unknown_member_id);
  CHECK(h.heartbeat("g", ra->resp.generation_id, g.b) == Errc::unknown_member_id);
  // b's session operation went with it: nothing expires for b later.
  h.advance(10 * kSessionMs);
  CHECK(h.coordinator->stats().sessions_expired == 2);  // a and c never heartbeated
  CHECK(h.coordinator->stats().members == 0);
  CHECK(h.state("g") == "Dead");  // empty, nothing committed: forgotten
}

TEST_CASE(
    "the leader leaving while a follower waits in SyncGroup sends the follower back to "
    "join") {
  StableGroup g;
  Harness& h = g.h;
  const auto ra = h.join("g", g.a);
  const auto rb = h.join("g", g.b);
  const auto sb = h.sync("g", rb->resp.generation_id, g.b);
  CHECK_FALSE(sb->answered());
  CHECK(h.coordinator->leave_group({"g", g.a}) == Errc::none);
  REQUIRE(sb->answered());
  CHECK(sb->resp.error_code == Errc::rebalance_in_progress);
  CHECK(sb->how == "the group rebalances again");
  const auto rb2 = h.join("g", g.b);
  CHECK(rb2->resp.leader == g.b);
}

TEST_CASE(
    "JoinGroup v4: MEMBER_ID_REQUIRED hands out an id, one never used expires after "
    "the 6000 ms session timeout") {
  Harness h;
  const auto first = h.join("g", "", true);
  REQUIRE(first->answered());
  CHECK(first->resp.error_code == Errc::member_id_required);
  const std::string id = first->resp.member_id;
  CHECK(id.rfind("client-", 0) == 0);  // Kafka's client_id-UUID
  const auto second = h.join("g", id, true);
  CHECK_FALSE(second->answered());  // now a member, waiting in the initial delay
  h.advance(kInitialDelayMs);
  REQUIRE(second->answered());
  CHECK(second->resp.member_id == id);
  CHECK(second->resp.leader == id);

  // A client that never comes back with its id.
  const auto ghost = h.join("g2", "", true);
  REQUIRE(ghost->resp.error_code == Errc::member_id_required);
  CHECK(h.state("g2") == "Empty");
  h.advance(kSessionMs);
  CHECK(h.coordinator->stats().pending_members_expired == 1);
  CHECK(h.state("g2") == "Dead");
  CHECK(h.join("g2", ghost->resp.member_id, true)->resp.error_code == Errc::unknown_member_id);
}

TEST_CASE("bad joins are refused with Kafka's codes and leave no stuck group") {
  Harness h;
  CHECK(h.join("g", "", false, 5999)->resp.error_code == Errc::invalid_session_timeout);
  CHECK(h.join("g", "", false, 30 * 60 * 1000 + 1)->resp.error_code ==
        Errc::invalid_session_timeout);
  CHECK(h.join("", "")->resp.error_code == Errc::invalid_group_id);
  CHECK(h.join("g", "", false, kSessionMs, {}, "")->resp.error_code ==
        Errc::inconsistent_group_protocol);  // no protocol type
  CHECK(h.join("g", "", false, kSessionMs, {{"range", {}}})->resp.error_code == Errc::none);
  CHECK(h.coordinator->stats().groups == 1);  // the refused joins created nothing
  // The group speaks "range" for protocol type "consumer" now.
  CHECK(h.join("g", "", false, kSessionMs, {{"sticky", {}}})->resp.error_code ==
        Errc::inconsistent_group_protocol);
  CHECK(h.join("g", "", false, kSessionMs, {{"range", {}}}, "connect")->resp.error_code ==
        Errc::inconsistent_group_protocol);
  // Only the good join waits; it completes as usual.
  h.advance(kInitialDelayMs);
  int waiting = 0;
  int answered_ok = 0;
  for (const auto& j : h.joins) {
    if (!j->answered()) ++waiting;
    if (j->answered() && j->resp.error_code == Errc::none) ++answered_ok;
  }
  CHECK(waiting == 0);
  CHECK(answered_ok == 1);
  CHECK(h.state("g") == "CompletingRebalance");
}

TEST_CASE("committed offsets: a restarted consumer resumes after its group's last commit") {
  Harness h;
  const auto j = h.join("g", "");
  h.advance(kInitialDelayMs);
  const std::string m = j->resp.member_id;
  const std::int32_t gen = j->resp.generation_id;
  h.sync("g", gen, m, {{m, assignment_of({0, 1})}});
  pb::OffsetCommitRequest req{
      "g", gen, m, -1, {{"orders", {{0, 42, 3, -1, std::string("by m")}, {1, 7, -1, -1, {}}}}}};
  const auto resp = h.coordinator->commit_offsets(req);
  CHECK(resp.topics.at(0).partitions.at(0).error_code == Errc::none);
  CHECK(resp.topics.at(0).partitions.at(1).error_code == Errc::none);
  CHECK(h.coordinator->leave_group({"g", m}) == Errc::none);
  CHECK(h.state("g") == "Empty");  // kept: it has offsets

  // The consumer restarts: a new member of the same group asks where to resume.
  const pb::OffsetFetchResponse fetched =
      h.coordinator->fetch_offsets({"g", std::vector<pb::OffsetFetchTopic>{{"orders", {0, 1, 2}}}});
  REQUIRE(fetched.topics.size() == 1);
  const auto& parts = fetched.topics[0].partitions;
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].committed_offset == 42);
  CHECK(parts[0].committed_leader_epoch == 3);
  CHECK(parts[0].metadata == std::optional<std::string>("by m"));
  CHECK(parts[1].committed_offset == 7);
  CHECK(parts[2].committed_offset == -1);  // nothing committed: -1, no error
  CHECK(parts[2].error_code == Errc::none);
  // v2+ "all": only what was committed.
  const pb::OffsetFetchResponse all = h.coordinator->fetch_offsets({"g", std::nullopt});
  REQUIRE(all.topics.size() == 1);
  CHECK(all.topics[0].partitions.size() == 2);
  // Another group sees nothing.
  CHECK(h.coordinator->fetch_offsets({"other", std::nullopt}).topics.empty());
}

TEST_CASE(
    "commits without a group (generation -1): stored, unknown partitions and long "
    "metadata refused per partition") {
  Harness h;
  pb::OffsetCommitRequest req{"assigner", -1, "", -1, {}};
  req.topics = {{"orders",
                 {{0, 10, -1, -1, {}},
                  {9, 10, -1, -1, {}},
                  {1, 11, -1, -1, std::string(4097, 'x')},
                  {2, 12, -1, -1, std::string(4096, 'x')}}},
                {"missing", {{0, 1, -1, -1, {}}}}};
  const auto resp = h.coordinator->commit_offsets(req);
  CHECK(resp.topics[0].partitions[0].error_code == Errc::none);
  CHECK(resp.topics[0].partitions[1].error_code == Errc::unknown_topic_or_partition);
  CHECK(resp.topics[0].partitions[2].error_code == Errc::offset_metadata_too_large);
  CHECK(resp.topics[0].partitions[3].error_code == Errc::none);
  CHECK(resp.topics[1].partitions[0].error_code == Errc::unknown_topic_or_partition);
  CHECK(h.coordinator->stats().offsets_committed == 2);
  const pb::ListGroupsResponse listed = h.coordinator->list_groups();
  REQUIRE(listed.groups.size() == 1);
  CHECK(listed.groups[0].group_id == "assigner");
  CHECK(listed.groups[0].protocol_type.empty());
  // A commit that stores nothing leaves no group behind.
  pb::OffsetCommitRequest nothing{"ghost", -1, "", -1, {{"missing", {{0, 1, -1, -1, {}}}}}};
  (void)h.coordinator->commit_offsets(nothing);
  CHECK(h.coordinator->list_groups().groups.size() == 1);
}

TEST_CASE(
    "DescribeGroups: members with their assignment once Stable, unknown groups are "
    "Dead") {
  StableGroup g;
  const pb::DescribedGroup d = g.h.describe("g");
  CHECK(d.error_code == Errc::none);
  CHECK(d.group_state == "Stable");
  CHECK(d.protocol_type == "consumer");
  CHECK(d.protocol_data == "range");
  REQUIRE(d.members.size() == 2);
  CHECK(d.members[0].member_id == g.a);
  CHECK(d.members[0].client_host == "/127.0.0.1");
  CHECK(d.members[0].member_assignment == assignment_of({0, 1}));
  CHECK(d.members[1].member_assignment == assignment_of({2, 3}));
  const pb::DescribedGroup unknown = g.h.describe("nobody");
  CHECK(unknown.error_code == Errc::none);
  CHECK(unknown.group_state == "Dead");
  CHECK(unknown.members.empty());
}

TEST_CASE("shutdown: waiting operations end shut_down and nothing is answered afterwards") {
  Harness h;
  const auto j = h.join("g", "");
  CHECK(h.coordinator->join_metrics().delayed == 1);
  CHECK(h.coordinator->heartbeat_metrics().delayed == 1);  // the new member's join timeout
  h.coordinator->shutdown();
  CHECK_FALSE(j->answered());
  CHECK(h.coordinator->join_metrics().shut_down_total == 1);
  CHECK(h.coordinator->heartbeat_metrics().shut_down_total == 1);
  CHECK(h.heartbeat("g", 1, "x") == Errc::coordinator_not_available);
  CHECK(h.join("g", "")->resp.error_code == Errc::coordinator_not_available);
  h.advance(60000);  // nothing left to expire
  CHECK_FALSE(j->answered());
}
