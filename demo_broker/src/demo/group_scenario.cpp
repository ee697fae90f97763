#include "group_scenario.hpp"

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

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

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

}  // namespace

void run_group_scenario(std::uint16_t port, const GroupScenarioTiming& timing,
                        const ScenarioOutput& out) {
  Client c1("member-1");
  Client c2("member-2");
  Client producer("demo-producer");
  c1.connect("127.0.0.1", port);
  c2.connect("127.0.0.1", port);
  producer.connect("127.0.0.1", port);

  const MetadataResponse meta = producer.metadata(std::vector<std::string>{kTopic});
  const auto partitions = static_cast<std::int32_t>(meta.topics.at(0).partitions.size());
  const std::vector<ProducerRecord> three{{"k0", "first"}, {"k1", "second"}, {"k2", "third"}};
  (void)producer.produce_one(kTopic, 0, three, 1);
  out.at("producer", fmt::format("topic {} has {} partitions; 3 records produced to {}-0", kTopic,
                                 partitions, kTopic));

  const FindCoordinatorResponse coordinator = c1.find_coordinator(kGroup);
  out.at("member-1", fmt::format("FindCoordinator {}: node {} at {}:{}", kGroup,
                                 coordinator.node_id, coordinator.host, coordinator.port));

  // ---- two members join: the join purgatory gathers them into one generation ----------------
  const JoinGroupResponse ask1 = c1.join_group(join_request("", timing));
  const std::string id1 = ask1.member_id;
  out.at("member-1", fmt::format("JoinGroup without a member id: {} ({})",
                                 errc_name(ask1.error_code), short_id(id1)));
  out.check(ask1.error_code == Errc::member_id_required && !id1.empty(),
            "a new member is answered MEMBER_ID_REQUIRED with its id, and joins again with it");
  const auto sent1 = Clock::now();
  c1.send(join_request(id1, timing), kJoinGroupVersion);
  out.at("member-1",
         fmt::format("JoinGroup with its id: parked in the join purgatory (the group was empty: "
                     "initial rebalance delay {} ms)",
                     timing.initial_rebalance_delay_ms));
  std::this_thread::sleep_for(milliseconds(timing.initial_rebalance_delay_ms / 3));
  const std::string id2 = c2.join_group(join_request("", timing)).member_id;
  const auto sent2 = Clock::now();
  c2.send(join_request(id2, timing), kJoinGroupVersion);
  out.at("member-2", fmt::format("JoinGroup as {}: parked too", short_id(id2)));
  const JoinGroupResponse j1 = c1.receive<JoinGroupResponse>(kJoinGroupVersion).body;
  const double waited1 = ms_since(sent1);
  const JoinGroupResponse j2 = c2.receive<JoinGroupResponse>(kJoinGroupVersion).body;
  const double waited2 = ms_since(sent2);
  out.at("member-1", fmt::format("JoinGroup answered after {:.0f} ms: generation {}, leader, "
                                 "with {} members' subscriptions",
                                 waited1, j1.generation_id, j1.members.size()));
  out.at("member-2", fmt::format("JoinGroup answered after {:.0f} ms: generation {}, follower",
                                 waited2, j2.generation_id));
  const std::int32_t generation = j1.generation_id;
  out.check(
      j1.error_code == Errc::none && j2.error_code == Errc::none && j2.generation_id == generation,
      fmt::format("both members joined generation {} together", generation));
  out.check(waited1 >= 2.0 * timing.initial_rebalance_delay_ms - 1 && waited1 < 5000,
            fmt::format("member-1 waited in the join purgatory for member-2: the initial "
                        "delay, restarted once for the newcomer ({:.0f} ms >= 2 x {} ms)",
                        waited1, timing.initial_rebalance_delay_ms));
  out.check(j1.leader == id1 && j1.members.size() == 2 && j2.members.empty(),
            "member-1, first to join, leads: only it receives the members' subscriptions");

  // ---- the leader's assignment goes through SyncGroup ----------------------------------------
  const auto topic_partitions = [partitions](const std::string&) { return partitions; };
  const std::vector<SyncGroupAssignment> split = range_assign(j1.members, topic_partitions);
  c2.send(SyncGroupRequest{kGroup, generation, id2, {}}, kSyncGroupVersion);  // waits for it
  const SyncGroupResponse s1 = c1.sync_group(SyncGroupRequest{kGroup, generation, id1, split});
  const SyncGroupResponse s2 = c2.receive<SyncGroupResponse>(kSyncGroupVersion).body;
  const std::vector<std::int32_t> p1 = partitions_of(s1.assignment);
  const std::vector<std::int32_t> p2 = partitions_of(s2.assignment);
  out.at("member-1", fmt::format("SyncGroup (with the range assignment): {}",
                                 describe_assignment(decode_assignment(s1.assignment))));
  out.at("member-2",
         fmt::format("SyncGroup: {}", describe_assignment(decode_assignment(s2.assignment))));
  std::set<std::int32_t> all(p1.begin(), p1.end());
  all.insert(p2.begin(), p2.end());
  out.check(p1.size() == 2 && p2.size() == 2 && all.size() == 4,
            "the 4 partitions are split 2 and 2, each to one member");

  // ---- member-1 reads its partition and commits ----------------------------------------------
  const FetchPartitionResponse read = c1.fetch_one(kTopic, 0, 0, 100, 1);
  const std::size_t count = read.records ? parse_record_batches(*read.records).size() : 0;
  const OffsetCommitResponse committed = c1.commit_offsets(
      OffsetCommitRequest{kGroup,
                          generation,
                          id1,
                          -1,
                          {{kTopic, {{0, static_cast<std::int64_t>(count), -1, -1, {}}}}}});
  const Errc commit_error = committed.topics.at(0).partitions.at(0).error_code;
  out.at("member-1", fmt::format("read {} records from {}-0, committed offset {}: {}", count,
                                 kTopic, count, errc_name(commit_error)));
  out.check(count == 3 && commit_error == Errc::none, "the member's commit was accepted");

  // ---- both heartbeat; then member-1 falls silent ---------------------------------------------
  int good_beats = 0;
  Clock::time_point silent_since;
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(milliseconds(timing.heartbeat_interval_ms));
    silent_since = Clock::now();  // before member-1's last heartbeat reaches the broker
    good_beats += c1.heartbeat({kGroup, generation, id1}) == Errc::none ? 1 : 0;
    good_beats += c2.heartbeat({kGroup, generation, id2}) == Errc::none ? 1 : 0;
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
    beat = c2.heartbeat({kGroup, generation, id2});
  }
  const double silent_ms = ms_since(silent_since);
  out.at("member-2", fmt::format("heartbeat answered {} ({:.0f} ms after member-1's last)",
                                 errc_name(beat), silent_ms));
  out.check(beat == Errc::rebalance_in_progress && silent_ms >= timing.session_timeout_ms &&
                silent_ms < timing.session_timeout_ms + 4000,
            fmt::format("the heartbeat purgatory expired member-1 after its {} ms session, not "
                        "before, and the group rebalances ({:.0f} ms)",
                        timing.session_timeout_ms, silent_ms));

  // ---- member-2 rejoins alone and takes everything ------------------------------------------
  const auto rejoin_sent = Clock::now();
  const JoinGroupResponse j3 = c2.join_group(join_request(id2, timing));
  out.at("member-2", fmt::format("JoinGroup again: answered after {:.0f} ms: generation {}, "
                                 "leader of {} member(s)",
                                 ms_since(rejoin_sent), j3.generation_id, j3.members.size()));
  out.check(j3.error_code == Errc::none && j3.generation_id == generation + 1 && j3.leader == id2 &&
                j3.members.size() == 1,
            "member-2 is alone in the next generation, and leads it (every member left had "
            "rejoined: the join phase completed at once)");
  const SyncGroupResponse s3 = c2.sync_group(
      SyncGroupRequest{kGroup, j3.generation_id, id2, range_assign(j3.members, topic_partitions)});
  out.at("member-2",
         fmt::format("SyncGroup: {}", describe_assignment(decode_assignment(s3.assignment))));
  out.check(partitions_of(s3.assignment).size() == 4,
            "member-2 now holds all 4 partitions, member-1's included");
  const OffsetFetchResponse resume =
      c2.fetch_offsets(OffsetFetchRequest{kGroup, std::vector<OffsetFetchTopic>{{kTopic, {0}}}});
  const std::int64_t resume_at = resume.topics.at(0).partitions.at(0).committed_offset;
  out.at("member-2", fmt::format("OffsetFetch {}-0: {}", kTopic, resume_at));
  out.check(resume_at == static_cast<std::int64_t>(count),
            "it resumes member-1's partition where member-1 committed");
  const Errc stale = c1.heartbeat({kGroup, generation, id1});
  out.at("member-1", fmt::format("wakes up and heartbeats: {}", errc_name(stale)));
  out.check(stale == Errc::unknown_member_id,
            "the expired member is told it is no longer in the group (it must join again)");
  (void)c2.leave_group({kGroup, id2});
  c1.close();
  c2.close();
  producer.close();
}

}  // namespace purgatory::broker
