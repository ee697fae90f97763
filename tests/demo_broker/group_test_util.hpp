// The group coordinator on a manual clock, for the group tests: a Harness whose timer runs its
// tasks inline when the test advances time, which records every JoinGroup/SyncGroup answer (each
// must come at most once), every event line and every outcome, and a StableGroup of two members.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "group/group_coordinator.hpp"
#include "protocol/consumer_protocol.hpp"
#include "purgatory/timer/executor.hpp"
#include "purgatory/timer/external_driver.hpp"

namespace purgatory::broker::group_test {

namespace pb = purgatory::broker;
using purgatory::Nanos;
using std::chrono::milliseconds;
using Errc = pb::Errc;

// GroupOutcome, its views copied.
struct Outcome {
  std::string purgatory;
  std::string key;
  std::string outcome;
  Nanos waited{0};
  std::string why;
  std::string text;
};

inline constexpr std::int32_t kSessionMs = 6000;
inline constexpr std::int32_t kRebalanceMs = 10000;
inline constexpr std::int32_t kInitialDelayMs = 3000;

inline pb::GroupConfig test_config() {
  pb::GroupConfig c;
  c.initial_rebalance_delay = milliseconds(kInitialDelayMs);
  return c;  // sessions 6 s .. 30 min, as Kafka's defaults
}

// One JoinGroup's answer, and how many times it came (must be exactly once).
struct Joined {
  int calls = 0;
  pb::JoinGroupResponse resp;
  std::string how;
  [[nodiscard]] bool answered() const { return calls > 0; }
};

struct Synced {
  int calls = 0;
  pb::SyncGroupResponse resp;
  std::string how;
  [[nodiscard]] bool answered() const { return calls > 0; }
};

// A coordinator on a ManualClock; its timer's tasks run inline when the test advances time.
struct Harness {
  purgatory::ManualClock clock;
  std::shared_ptr<purgatory::SystemTimer> timer;
  std::unique_ptr<purgatory::ExternalDriver> driver;
  std::vector<std::string> events;
  std::vector<Outcome> outcomes;
  std::vector<std::shared_ptr<Joined>> joins;  // every join sent, to check each got one answer
  std::vector<std::shared_ptr<Synced>> syncs;
  std::unique_ptr<pb::GroupCoordinator> coordinator;

  explicit Harness(pb::GroupConfig config = test_config()) {
    purgatory::TimerOptions o;
    o.name = "manual";
    o.clock = &clock;
    o.executor = std::make_shared<purgatory::InlineExecutor>();
    o.driver = purgatory::TimerOptions::Driver::external;
    timer = std::make_shared<purgatory::SystemTimer>(std::move(o));
    driver = std::make_unique<purgatory::ExternalDriver>(*timer);
    pb::GroupCoordinatorHooks hooks;
    hooks.on_event = [this](std::string_view e) { events.emplace_back(e); };
    hooks.on_outcome = [this](const pb::GroupOutcome& told) {
      outcomes.push_back({std::string(told.purgatory), told.key, std::string(told.outcome),
                          told.waited, told.why, told.text});
    };
    hooks.partition_exists = [](const std::string& topic, std::int32_t partition) {
      return topic == "orders" && partition >= 0 && partition < 4;
    };
    coordinator = std::make_unique<pb::GroupCoordinator>(timer, config, std::move(hooks));
  }
  ~Harness() {
    coordinator->shutdown();
    for (const auto& j : joins)
      CHECK(j->calls <= 1);
    for (const auto& s : syncs)
      CHECK(s->calls <= 1);
  }

  // Moves time forward 1 ms at a time, as real time passes: an operation scheduled by an expiry
  // counts from the instant that expiry was due, not from the end of a big jump.
  void advance(std::int64_t ms) {
    for (std::int64_t i = 0; i < ms; ++i) {
      clock.advance(milliseconds(1));
      while (driver->advance_clock()) {
      }
    }
  }

  std::shared_ptr<Joined> join(const std::string& group, const std::string& member_id,
                               bool require_known = false, std::int32_t session = kSessionMs,
                               std::vector<pb::JoinGroupProtocol> protocols = {},
                               std::string protocol_type = "consumer") {
    if (protocols.empty()) {
      protocols = {{"range", pb::encode_subscription({0, {"orders"}, std::nullopt})},
                   {"roundrobin", pb::encode_subscription({0, {"orders"}, std::nullopt})}};
    }
    pb::JoinGroupRequest req{
        group, session, kRebalanceMs, member_id, std::move(protocol_type), std::move(protocols)};
    auto out = std::make_shared<Joined>();
    joins.push_back(out);
    coordinator->join_group(req, pb::JoinContext{require_known, "client", "/127.0.0.1"},
                            [out](const pb::JoinGroupResponse& r, std::string_view how) {
                              ++out->calls;
                              out->resp = r;
                              out->how = how;
                            });
    return out;
  }

  std::shared_ptr<Synced> sync(const std::string& group, std::int32_t generation,
                               const std::string& member_id,
                               std::vector<pb::SyncGroupAssignment> assignments = {}) {
    auto out = std::make_shared<Synced>();
    syncs.push_back(out);
    coordinator->sync_group(pb::SyncGroupRequest{group, generation, member_id, assignments},
                            [out](const pb::SyncGroupResponse& r, std::string_view how) {
                              ++out->calls;
                              out->resp = r;
                              out->how = how;
                            });
    return out;
  }

  Errc heartbeat(const std::string& group, std::int32_t generation, const std::string& member) {
    return coordinator->heartbeat(pb::HeartbeatRequest{group, generation, member});
  }

  [[nodiscard]] pb::DescribedGroup describe(const std::string& group) const {
    return coordinator->describe_groups(pb::DescribeGroupsRequest{{group}}).groups.at(0);
  }
  [[nodiscard]] std::string state(const std::string& group) const {
    return describe(group).group_state;
  }
  [[nodiscard]] bool saw(std::string_view text) const {
    for (const std::string& e : events) {
      if (e.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

inline pb::Bytes assignment_of(std::vector<std::int32_t> partitions) {
  return pb::encode_assignment({0, {{"orders", std::move(partitions)}}, std::nullopt});
}

// Two members, "a" (leader) and "b", Stable in generation 1 after the initial delay. Members
// join with ids so the test can name them: JoinGroup below v4 hands out ids, so this uses it.
struct StableGroup {
  Harness h;
  std::string a;
  std::string b;
  std::int32_t generation = 0;

  explicit StableGroup(pb::GroupConfig config = test_config()) : h(config) {
    const auto ja = h.join("g", "");
    const auto jb = h.join("g", "");
    h.advance(2 * kInitialDelayMs);  // the delay, extended once for the second member
    REQUIRE(ja->answered());
    REQUIRE(jb->answered());
    a = ja->resp.member_id;
    b = jb->resp.member_id;
    generation = ja->resp.generation_id;
    REQUIRE(ja->resp.leader == a);
    const auto sa =
        h.sync("g", generation, a, {{a, assignment_of({0, 1})}, {b, assignment_of({2, 3})}});
    const auto sb = h.sync("g", generation, b);
    REQUIRE(sa->resp.error_code == Errc::none);
    REQUIRE(sb->resp.error_code == Errc::none);
    REQUIRE(h.state("g") == "Stable");
  }
};

}  // namespace purgatory::broker::group_test
