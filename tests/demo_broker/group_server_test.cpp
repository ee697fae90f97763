// The group apis through the real server, in-process on a free loopback port, with the
// codec-based Client: JoinGroup parks in the join purgatory, bad group requests get error codes
// on a connection that stays open, and a client vanishing mid-rebalance does not stall its group.
// Real time, with short timeouts and generous upper bounds.
#include "group/group_coordinator.hpp"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "broker_test_util.hpp"
#include "demo/client.hpp"
#include "protocol/consumer_protocol.hpp"
#include "server/broker_runner.hpp"

namespace pb = purgatory::broker;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr std::int32_t kDelayMs = 200;
constexpr std::int32_t kSessionMs = 500;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

pb::BrokerConfig group_config(pb::test::LogCapture& log) {
  pb::BrokerConfig c = pb::test::test_config(log);
  c.partitions = 2;
  c.groups.initial_rebalance_delay = milliseconds(kDelayMs);
  c.groups.min_session_timeout = milliseconds(kSessionMs);
  return c;
}

pb::JoinGroupRequest join(const std::string& member_id, std::int32_t session = kSessionMs) {
  return {"g",       session,    10000,
          member_id, "consumer", {{"range", pb::encode_subscription({0, {"t"}, std::nullopt})}}};
}

}  // namespace

TEST_CASE(
    "JoinGroup v4 through the broker: MEMBER_ID_REQUIRED, then 200 ms in the join "
    "purgatory, FindCoordinator names this broker") {
  pb::test::LogCapture log;
  pb::BrokerRunner broker(group_config(log));
  pb::Client c("kcat-like");
  c.connect("127.0.0.1", broker.port());
  const pb::FindCoordinatorResponse coordinator = c.find_coordinator("g");
  CHECK(coordinator.error_code == pb::Errc::none);
  CHECK(coordinator.host == "127.0.0.1");
  CHECK(coordinator.port == broker.port());
  CHECK(coordinator.node_id == 1);

  const pb::JoinGroupResponse first = c.join_group(join(""));
  REQUIRE(first.error_code == pb::Errc::member_id_required);
  CHECK(first.member_id.rfind("kcat-like-", 0) == 0);
  const auto sent = Clock::now();
  c.send(join(first.member_id), pb::kJoinGroupVersion);
  REQUIRE(pb::test::wait_until([&] { return broker.metrics().join.delayed == 1; }));
  const pb::JoinGroupResponse joined = c.receive<pb::JoinGroupResponse>(pb::kJoinGroupVersion).body;
  const double waited = ms_since(sent);
  CHECK(joined.error_code == pb::Errc::none);
  CHECK(joined.generation_id == 1);
  CHECK(joined.leader == first.member_id);
  CHECK(waited >= kDelayMs - 1);
  CHECK(waited < 5000);
  const pb::BrokerMetrics m = broker.metrics();
  CHECK(m.join.name == "join");
  CHECK(m.heartbeat.name == "heartbeat");
  CHECK(m.join.expired_total == 1);  // the initial delay
  CHECK(m.groups.groups == 1);
  CHECK(m.groups.members == 1);
  CHECK(log.contains("JoinGroup v4 corr="));
  CHECK(log.contains("join phase ended after the initial rebalance delay (200 ms)"));
  const pb::DescribeGroupsResponse d = c.describe_groups({{"g"}});
  REQUIRE(d.groups.size() == 1);
  CHECK(d.groups[0].group_state == "CompletingRebalance");
  REQUIRE(d.groups[0].members.size() == 1);
  CHECK(d.groups[0].members[0].client_id == "kcat-like");
  CHECK(d.groups[0].members[0].client_host == "/127.0.0.1");
  const pb::ListGroupsResponse l = c.list_groups();
  REQUIRE(l.groups.size() == 1);
  CHECK(l.groups[0].protocol_type == "consumer");
}

TEST_CASE("bad group requests get Kafka's error codes and the connection stays open") {
  pb::test::LogCapture log;
  pb::BrokerRunner broker(group_config(log));
  pb::Client c;
  c.connect("127.0.0.1", broker.port());
  CHECK(c.join_group(join("", kSessionMs - 1)).error_code == pb::Errc::invalid_session_timeout);
  pb::JoinGroupRequest no_protocols = join("");
  no_protocols.protocols.clear();
  CHECK(c.join_group(no_protocols).error_code == pb::Errc::inconsistent_group_protocol);
  CHECK(c.join_group(join("who-is-this")).error_code == pb::Errc::unknown_member_id);
  CHECK(c.heartbeat({"g", 1, "nobody"}) == pb::Errc::unknown_member_id);
  CHECK(c.leave_group({"g", "nobody"}) == pb::Errc::unknown_member_id);
  CHECK(c.sync_group({"g", 1, "nobody", {}}).error_code == pb::Errc::unknown_member_id);
  CHECK(c.heartbeat({"", 1, "nobody"}) == pb::Errc::invalid_group_id);
  const auto commit = [&](const std::string& topic) {
    return c.commit_offsets({"g", 4, "nobody", -1, {{topic, {{0, 1, -1, -1, std::nullopt}}}}})
        .topics.at(0)
        .partitions.at(0)
        .error_code;
  };
  CHECK(commit("t") == pb::Errc::unknown_topic_or_partition);
  c.metadata(std::vector<std::string>{"t"});           // creates it
  CHECK(commit("t") == pb::Errc::illegal_generation);  // a generation of a group that is gone
  const pb::FindCoordinatorResponse tx = [&] {
    c.send(pb::FindCoordinatorRequest{"tx-1", pb::kCoordinatorKeyTransaction},
           pb::kFindCoordinatorVersion);
    return c.receive<pb::FindCoordinatorResponse>(pb::kFindCoordinatorVersion).body;
  }();
  // Transactions are not spoken: the code every client takes as fatal, and why.
  CHECK(tx.error_code == pb::Errc::transactional_id_authorization_failed);
  CHECK(tx.error_message.value_or("").find("does not speak transactions") != std::string::npos);
  c.send(pb::FindCoordinatorRequest{"k", 2}, pb::kFindCoordinatorVersion);
  const auto other = c.receive<pb::FindCoordinatorResponse>(pb::kFindCoordinatorVersion).body;
  CHECK(other.error_code == pb::Errc::invalid_request);
  CHECK(other.error_message.value_or("").find("groups only") != std::string::npos);
  // The same connection still works, and nothing counted as malformed.
  CHECK(c.api_versions(2).error_code == pb::Errc::none);
  CHECK(broker.metrics().malformed_requests == 0);
  CHECK(broker.metrics().groups.groups == 0);  // no refused join left a group behind
  // A good member still joins.
  const std::string id = c.join_group(join("")).member_id;
  CHECK(c.join_group(join(id)).error_code == pb::Errc::none);
}

TEST_CASE(
    "a client that disconnects while its JoinGroup waits does not stall its group: its "
    "session expires and the other member leads alone") {
  pb::test::LogCapture log;
  pb::BrokerRunner broker(group_config(log));
  pb::Client gone("gone");
  pb::Client stays("stays");
  gone.connect("127.0.0.1", broker.port());
  stays.connect("127.0.0.1", broker.port());
  const std::string gone_id = gone.join_group(join("")).member_id;
  const std::string stays_id = stays.join_group(join("")).member_id;
  gone.send(join(gone_id), pb::kJoinGroupVersion);
  REQUIRE(pb::test::wait_until([&] { return broker.metrics().groups.members == 1; }));
  gone.close();  // parked in the join purgatory, then gone
  const auto started = Clock::now();
  // stays joins; while the vanished member is in the generation (it joined first and leads, but
  // will never send the assignment), stays waits in SyncGroup until gone's session lapses, is
  // told REBALANCE_IN_PROGRESS, and joins again. (On a slow machine stays may even join after
  // the first join phase: then the next one waits for gone until its session lapses.)
  pb::JoinGroupResponse j = stays.join_group(join(stays_id));
  int rounds = 0;
  while (j.error_code == pb::Errc::none && j.leader != stays_id && ms_since(started) < 10000) {
    const pb::SyncGroupResponse s = stays.sync_group({"g", j.generation_id, stays_id, {}});
    CHECK(s.error_code == pb::Errc::rebalance_in_progress);
    j = stays.join_group(join(stays_id));
    ++rounds;
  }
  CHECK(j.error_code == pb::Errc::none);
  CHECK(j.leader == stays_id);
  CHECK(j.members.size() == 1);
  CHECK(rounds <= 1);
  CHECK(ms_since(started) < 10000);
  const pb::BrokerMetrics m = broker.metrics();
  CHECK(m.groups.sessions_expired == 1);
  CHECK(m.heartbeat.expired_total >= 1);
  CHECK(log.contains("sent no heartbeat within its session timeout (500 ms)"));
  CHECK(log.contains("nothing written"));  // gone's answer was dropped, not sent anywhere
}
