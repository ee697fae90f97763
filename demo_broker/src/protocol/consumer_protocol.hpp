// The consumer protocol: what Kafka consumers put in the opaque bytes of JoinGroup (a
// subscription per member) and SyncGroup (an assignment per member). The coordinator never reads
// them; the group's leader does (it computes the assignment), and so does the broker's verbose
// log, to say which partitions each member got.
//
// ConsumerProtocolSubscription: version int16, topics [string], user_data (nullable bytes); v1+
// append fields this codec skips. ConsumerProtocolAssignment: version int16,
// assigned_partitions [topic, partitions [int32]], user_data (nullable bytes). Encoded at version
// 0, which every consumer reads.
//
// Errors: the decoders throw DecodeError for bytes that do not hold a subscription/assignment.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "protocol/join_group.hpp"
#include "protocol/sync_group.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct ConsumerSubscription {
  std::int16_t version = 0;  // as read; always 0 when encoded
  std::vector<std::string> topics;
  std::optional<Bytes> user_data;

  bool operator==(const ConsumerSubscription&) const = default;
};

struct AssignedTopic {
  std::string topic;
  std::vector<std::int32_t> partitions;

  bool operator==(const AssignedTopic&) const = default;
};

struct ConsumerAssignment {
  std::int16_t version = 0;  // as read; always 0 when encoded
  std::vector<AssignedTopic> topics;
  std::optional<Bytes> user_data;

  bool operator==(const ConsumerAssignment&) const = default;
};

[[nodiscard]] Bytes encode_subscription(const ConsumerSubscription& subscription);
// Any version: fields after user_data (v1+) are skipped.
[[nodiscard]] ConsumerSubscription decode_subscription(ByteView bytes);
[[nodiscard]] Bytes encode_assignment(const ConsumerAssignment& assignment);
// Any version: fields after user_data are skipped.
[[nodiscard]] ConsumerAssignment decode_assignment(ByteView bytes);

// Kafka's RangeAssignor, what a group's leader computes: for each topic, the members subscribed to
// it, sorted by member id, take consecutive ranges of its partitions, the first ones one more when
// they do not divide evenly. `partitions(topic)` says how many partitions a topic has (0 or less:
// none). One assignment per member, in the order of `members`; a member whose metadata is not a
// subscription gets an empty one.
[[nodiscard]] std::vector<SyncGroupAssignment> range_assign(
    const std::vector<JoinGroupMember>& members,
    const std::function<std::int32_t(const std::string& topic)>& partitions);

// "demo-0,demo-1 other-3", or "(none)": for log lines.
[[nodiscard]] std::string describe_assignment(const ConsumerAssignment& assignment);

}  // namespace purgatory::broker
