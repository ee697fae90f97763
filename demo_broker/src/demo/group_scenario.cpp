#include "demo/group_scenario.hpp"

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "demo/client.hpp"
#include "protocol/consumer_protocol.hpp"

namespace purgatory::broker {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kGroup = "demo-group";
constexpr const char* kTopic = "groups";
constexpr std::int32_t kRebalanceTimeoutMs = 5000;

JoinGroupRequest join_request(const std::string& member_id, const GroupScenarioTiming& timing) {
  JoinGroupRequest r;
  r.group_id = kGroup;
  r.session_timeout_ms = timing.session_timeout_ms;
  r.rebalance_timeout_ms = kRebalanceTimeoutMs;
  r.member_id = member_id;
  r.protocol_type = "consumer";
  r.protocols = {{"range", encode_subscription({0, {kTopic}, std::nullopt})}};
  return r;
}

std::vector<std::int32_t> partitions_of(const Bytes& assignment) {
  std::vector<std::int32_t> out;
  for (const AssignedTopic& t : decode_assignment(assignment).topics) {
    out.insert(out.end(), t.partitions.begin(), t.partitions.end());
  }
  return out;
}

std::string short_id(const std::string& member_id) {
  // "member-1-3f2a9c1e-..." -> "member-1-3f2a9c1e": enough to tell members apart.
  const auto dash = member_id.find('-', member_id.find('-') + 1);
  const auto end = dash == std::string::npos ? dash : member_id.find('-', dash + 1);
  return member_id.substr(0, end);
}

// The scenario's clients and what it has learned so far, handed from step to step.
struct GroupRun {
  GroupRun(const GroupScenarioTiming& t, const ScenarioOutput& o) : timing(t), out(o) {}

  const GroupScenarioTiming& timing;
  const ScenarioOutput& out;
  Client c1{"member-1"};
  Client c2{"member-2"};
  Client producer{"demo-producer"};
  std::int32_t partitions = 0;  // of kTopic
  std::string id1;
  std::string id2;
  std::int32_t generation = -1;  // the one both members joined
  std::size_t committed = 0;     // member-1's committed offset on partition 0

  [[nodiscard]] std::vector<SyncGroupAssignment> assign(
      const std::vector<JoinGroupMember>& members) const {
    return range_assign(members, [n = partitions](const std::string&) { return n; });
  }
};

// The topic with 3 records on partition 0, and where the group's coordinator is.
void prepare(GroupRun& run, std::uint16_t port) {
  run.c1.connect("127.0.0.1", port);
  run.c2.connect("127.0.0.1", port);
  run.producer.connect("127.0.0.1", port);
  const MetadataResponse meta = run.producer.metadata(std::vector<std::string>{kTopic});
  run.partitions = static_cast<std::int32_t>(meta.topics.at(0).partitions.size());
  const std::vector<ProducerRecord> three{{"k0", "first"}, {"k1", "second"}, {"k2", "third"}};
  (void)run.producer.produce_one(kTopic, 0, three, 1);
  run.out.at("producer", fmt::format("topic {} has {} partitions; 3 records produced to {}-0",
                                     kTopic, run.partitions, kTopic));
  const FindCoordinatorResponse coordinator = run.c1.find_coordinator(kGroup);
  run.out.at("member-1", fmt::format("FindCoordinator {}: node {} at {}:{}", kGroup,
                                     coordinator.node_id, coordinator.host, coordinator.port));
}

// Two members join: the join purgatory gathers them into one generation; returns the members'
// subscriptions, which only the leader (member-1) receives.
std::vector<JoinGroupMember> join_both(GroupRun& run) {
  const GroupScenarioTiming& timing = run.timing;
  const ScenarioOutput& out = run.out;
  const JoinGroupResponse ask1 = run.c1.join_group(join_request("", timing));
  run.id1 = ask1.member_id;
  out.at("member-1", fmt::format("JoinGroup without a member id: {} ({})",
                                 errc_name(ask1.error_code), short_id(run.id1)));
  out.check(ask1.error_code == Errc::member_id_required && !run.id1.empty(),
            "a new member is answered MEMBER_ID_REQUIRED with its id, and joins again with it");
  const auto sent1 = Clock::now();
  run.c1.send(join_request(run.id1, timing), kJoinGroupVersion);
  out.at("member-1",
         fmt::format("JoinGroup with its id: parked in the join purgatory (the group was empty: "
                     "initial rebalance delay {} ms)",
                     timing.initial_rebalance_delay_ms));
  std::this_thread::sleep_for(milliseconds(timing.initial_rebalance_delay_ms / 3));
  run.id2 = run.c2.join_group(join_request("", timing)).member_id;
  const auto sent2 = Clock::now();
  run.c2.send(join_request(run.id2, timing), kJoinGroupVersion);
  out.at("member-2", fmt::format("JoinGroup as {}: parked too", short_id(run.id2)));
  const JoinGroupResponse j1 = run.c1.receive<JoinGroupResponse>(kJoinGroupVersion).body;
  const double waited1 = ms_since(sent1);
  const JoinGroupResponse j2 = run.c2.receive<JoinGroupResponse>(kJoinGroupVersion).body;
  const double waited2 = ms_since(sent2);
  out.at("member-1", fmt::format("JoinGroup answered after {:.0f} ms: generation {}, leader, "
                                 "with {} members' subscriptions",
                                 waited1, j1.generation_id, j1.members.size()));
  out.at("member-2", fmt::format("JoinGroup answered after {:.0f} ms: generation {}, follower",
                                 waited2, j2.generation_id));
  run.generation = j1.generation_id;
  out.check(j1.error_code == Errc::none && j2.error_code == Errc::none &&
                j2.generation_id == run.generation,
            fmt::format("both members joined generation {} together", run.generation));
  out.check(waited1 >= 2.0 * timing.initial_rebalance_delay_ms - 1 && waited1 < 5000,
            fmt::format("member-1 waited in the join purgatory for member-2: the initial "
                        "delay, restarted once for the newcomer ({:.0f} ms >= 2 x {} ms)",
                        waited1, timing.initial_rebalance_delay_ms));
  out.check(j1.leader == run.id1 && j1.members.size() == 2 && j2.members.empty(),
            "member-1, first to join, leads: only it receives the members' subscriptions");
  return j1.members;
}

// The leader's assignment goes through SyncGroup to both.
void sync_both(GroupRun& run, const std::vector<JoinGroupMember>& members) {
  const std::int32_t generation = run.generation;
  run.c2.send(SyncGroupRequest{kGroup, generation, run.id2, {}}, kSyncGroupVersion);  // waits
  const SyncGroupResponse s1 =
      run.c1.sync_group(SyncGroupRequest{kGroup, generation, run.id1, run.assign(members)});
  const SyncGroupResponse s2 = run.c2.receive<SyncGroupResponse>(kSyncGroupVersion).body;
  const std::vector<std::int32_t> p1 = partitions_of(s1.assignment);
  const std::vector<std::int32_t> p2 = partitions_of(s2.assignment);
  run.out.at("member-1", fmt::format("SyncGroup (with the range assignment): {}",
                                     describe_assignment(decode_assignment(s1.assignment))));
  run.out.at("member-2",
             fmt::format("SyncGroup: {}", describe_assignment(decode_assignment(s2.assignment))));
  std::set<std::int32_t> all(p1.begin(), p1.end());
  all.insert(p2.begin(), p2.end());
  run.out.check(p1.size() == 2 && p2.size() == 2 && all.size() == 4,
                "the 4 partitions are split 2 and 2, each to one member");
}

// member-1 reads its partition and commits.
void read_and_commit(GroupRun& run) {
  const FetchPartitionResponse read = run.c1.fetch_one(kTopic, 0, 0, 100, 1);
  run.committed = read.records ? parse_record_batches(*read.records).size() : 0;
  const OffsetCommitResponse committed = run.c1.commit_offsets(
      OffsetCommitRequest{kGroup,
                          run.generation,
                          run.id1,
                          -1,
                          {{kTopic, {{0, static_cast<std::int64_t>(run.committed), -1, -1, {}}}}}});
  const Errc commit_error = committed.topics.at(0).partitions.at(0).error_code;
  run.out.at("member-1",
             fmt::format("read {} records from {}-0, committed offset {}: {}", run.committed,
                         kTopic, run.committed, errc_name(commit_error)));
  run.out.check(run.committed == 3 && commit_error == Errc::none,
                "the member's commit was accepted");
}

// Both heartbeat; then member-1 falls silent, and the heartbeat purgatory expires it.
void expire_silent_member(GroupRun& run) {
  const GroupScenarioTiming& timing = run.timing;
  const ScenarioOutput& out = run.out;
  int good_beats = 0;
  Clock::time_point silent_since;
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(milliseconds(timing.heartbeat_interval_ms));
    silent_since = Clock::now();  // before member-1's last heartbeat reaches the broker
    good_beats += run.c1.heartbeat({kGroup, run.generation, run.id1}) == Errc::none ? 1 : 0;
    good_beats += run.c2.heartbeat({kGroup, run.generation, run.id2}) == Errc::none ? 1 : 0;
  }
  out.at("both", fmt::format("heartbeat every {} ms: {} of 8 answered NONE",
                             timing.heartbeat_interval_ms, good_beats));
  out.check(good_beats == 8, "heartbeats in a stable generation are answered NONE");
  out.at("member-1", fmt::format("stops heartbeating (a stuck process); its session timeout is "
                                 "{} ms",
                                 timing.session_timeout_ms));
  Errc beat = Errc::none;
  while (beat == Errc::none && ms_since(silent_since) < 10.0 * timing.session_timeout_ms) {
    std::this_thread::sleep_for(milliseconds(timing.heartbeat_interval_ms));
    beat = run.c2.heartbeat({kGroup, run.generation, run.id2});
  }
  const double silent_ms = ms_since(silent_since);
  out.at("member-2", fmt::format("heartbeat answered {} ({:.0f} ms after member-1's last)",
                                 errc_name(beat), silent_ms));
  out.check(beat == Errc::rebalance_in_progress && silent_ms >= timing.session_timeout_ms &&
                silent_ms < timing.session_timeout_ms + 4000,
            fmt::format("the heartbeat purgatory expired member-1 after its {} ms session, not "
                        "before, and the group rebalances ({:.0f} ms)",
                        timing.session_timeout_ms, silent_ms));
}

// member-2 rejoins alone, takes every partition and resumes where member-1 committed.
void survivor_takes_over(GroupRun& run) {
  const ScenarioOutput& out = run.out;
  const auto rejoin_sent = Clock::now();
  const JoinGroupResponse j3 = run.c2.join_group(join_request(run.id2, run.timing));
  out.at("member-2", fmt::format("JoinGroup again: answered after {:.0f} ms: generation {}, "
                                 "leader of {} member(s)",
                                 ms_since(rejoin_sent), j3.generation_id, j3.members.size()));
  out.check(j3.error_code == Errc::none && j3.generation_id == run.generation + 1 &&
                j3.leader == run.id2 && j3.members.size() == 1,
            "member-2 is alone in the next generation, and leads it (every member left had "
            "rejoined: the join phase completed at once)");
  const SyncGroupResponse s3 = run.c2.sync_group(
      SyncGroupRequest{kGroup, j3.generation_id, run.id2, run.assign(j3.members)});
  out.at("member-2",
         fmt::format("SyncGroup: {}", describe_assignment(decode_assignment(s3.assignment))));
  out.check(partitions_of(s3.assignment).size() == 4,
            "member-2 now holds all 4 partitions, member-1's included");
  const OffsetFetchResponse resume = run.c2.fetch_offsets(
      OffsetFetchRequest{kGroup, std::vector<OffsetFetchTopic>{{kTopic, {0}}}});
  const std::int64_t resume_at = resume.topics.at(0).partitions.at(0).committed_offset;
  out.at("member-2", fmt::format("OffsetFetch {}-0: {}", kTopic, resume_at));
  out.check(resume_at == static_cast<std::int64_t>(run.committed),
            "it resumes member-1's partition where member-1 committed");
  const Errc stale = run.c1.heartbeat({kGroup, run.generation, run.id1});
  out.at("member-1", fmt::format("wakes up and heartbeats: {}", errc_name(stale)));
  out.check(stale == Errc::unknown_member_id,
            "the expired member is told it is no longer in the group (it must join again)");
}

}  // namespace

void run_group_scenario(std::uint16_t port, const GroupScenarioTiming& timing,
                        const ScenarioOutput& out) {
  GroupRun run(timing, out);
  prepare(run, port);
  const std::vector<JoinGroupMember> members = join_both(run);
  sync_both(run, members);
  read_and_commit(run);
  expire_silent_member(run);
  survivor_takes_over(run);
  (void)run.c2.leave_group({kGroup, run.id2});
  run.c1.close();
  run.c2.close();
  run.producer.close();
}

}  // namespace purgatory::broker
