#include "protocol/consumer_protocol.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace purgatory::broker {

namespace {

constexpr std::size_t kAssignedTopicBytes = kMinStringBytes + kMinArrayBytes;

}  // namespace

Bytes encode_subscription(const ConsumerSubscription& subscription) {
  Writer w;
  w.write_int16(0);
  write_array(w, subscription.topics,
              [](Writer& out, const std::string& t) { out.write_string(t); });
  w.write_nullable_bytes(subscription.user_data);
  return std::move(w).take();
}

ConsumerSubscription decode_subscription(ByteView bytes) {
  Reader r(bytes);
  ConsumerSubscription s;
  s.version = r.read_int16("subscription.version");
  s.topics = read_array(r, "subscription.topics", kMinStringBytes,
                        [](Reader& in) { return in.read_string("subscription.topics[]"); });
  // Kafka's consumers may end a v0 subscription right after the topics.
  if (!r.at_end()) s.user_data = r.read_nullable_bytes("subscription.user_data");
  return s;
}

Bytes encode_assignment(const ConsumerAssignment& assignment) {
  Writer w;
  w.write_int16(0);
  write_array(w, assignment.topics, [](Writer& out, const AssignedTopic& t) {
    out.write_string(t.topic);
    write_int32_array(out, t.partitions);
  });
  w.write_nullable_bytes(assignment.user_data);
  return std::move(w).take();
}

ConsumerAssignment decode_assignment(ByteView bytes) {
  Reader r(bytes);
  ConsumerAssignment a;
  a.version = r.read_int16("assignment.version");
  a.topics = read_array(r, "assignment.topics", kAssignedTopicBytes, [](Reader& in) {
    AssignedTopic t;
    t.topic = in.read_string("assignment.topics[].topic");
    t.partitions = read_int32_array(in, "assignment.topics[].partitions");
    return t;
  });
  if (!r.at_end()) a.user_data = r.read_nullable_bytes("assignment.user_data");
  return a;
}

std::vector<SyncGroupAssignment> range_assign(
    const std::vector<JoinGroupMember>& members,
    const std::function<std::int32_t(const std::string& topic)>& partitions) {
  std::map<std::string, std::vector<std::string>> subscribers;  // topic -> member ids
  for (const JoinGroupMember& m : members) {
    try {
      for (const std::string& topic : decode_subscription(m.metadata).topics)
        subscribers[topic].push_back(m.member_id);
    } catch (const DecodeError&) {
      // Not a consumer: nothing for it.
    }
  }
  std::map<std::string, ConsumerAssignment> assigned;
  for (auto& [topic, ids] : subscribers) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    const std::int32_t count = std::max(partitions(topic), 0);
    const auto n = static_cast<std::int32_t>(ids.size());
    std::int32_t next = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t share = count / n + (i < count % n ? 1 : 0);
      if (share == 0) continue;
      AssignedTopic& t = assigned[ids[static_cast<std::size_t>(i)]].topics.emplace_back();
      t.topic = topic;
      for (std::int32_t k = 0; k < share; ++k)
        t.partitions.push_back(next++);
    }
  }
  std::vector<SyncGroupAssignment> out;
  out.reserve(members.size());
  for (const JoinGroupMember& m : members)
    out.push_back({m.member_id, encode_assignment(assigned[m.member_id])});
  return out;
}

std::string describe_assignment(const ConsumerAssignment& assignment) {
  std::string out;
  for (const AssignedTopic& t : assignment.topics) {
    for (const std::int32_t p : t.partitions) {
      if (!out.empty()) out += ',';
      out += fmt::format("{}-{}", t.topic, p);
    }
  }
  return out.empty() ? "(none)" : out;
}

}  // namespace purgatory::broker
