// OffsetCommit (key 8), versions 0..6: a consumer records how far it has read, per partition, in
// its group, so that whoever reads those partitions next resumes after it.
//
// Request, per OffsetCommitRequest.json: group_id, generation_id (v1+), member_id (v1+),
// retention_time_ms (v2..4), topics [name, partitions [partition_index, committed_offset,
// committed_leader_epoch (v6+), commit_timestamp (v1 only), committed_metadata (nullable)]].
// Response: throttle_time_ms (v3+), topics [name, partitions [partition_index, error_code]]. v0
// commits without a generation (generation -1, member ""): a group that is not managed by the
// coordinator. v7 (static membership) and the flexible v8+ are not spoken.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct OffsetCommitPartition {
  std::int32_t partition_index = 0;
  std::int64_t committed_offset = -1;
  std::int32_t committed_leader_epoch = -1;  // v6+
  std::int64_t commit_timestamp = -1;        // v1 only
  std::optional<std::string> committed_metadata;

  bool operator==(const OffsetCommitPartition&) const = default;
};

struct OffsetCommitTopic {
  std::string name;
  std::vector<OffsetCommitPartition> partitions;

  bool operator==(const OffsetCommitTopic&) const = default;
};

struct OffsetCommitRequest {
  std::string group_id;
  std::int32_t generation_id = -1;      // v1+
  std::string member_id;                // v1+
  std::int64_t retention_time_ms = -1;  // v2..4; ignored, as by Kafka since 2.1
  std::vector<OffsetCommitTopic> topics;

  bool operator==(const OffsetCommitRequest&) const = default;
};

struct OffsetCommitPartitionResponse {
  std::int32_t partition_index = 0;
  Errc error_code = Errc::none;

  bool operator==(const OffsetCommitPartitionResponse&) const = default;
};

struct OffsetCommitTopicResponse {
  std::string name;
  std::vector<OffsetCommitPartitionResponse> partitions;

  bool operator==(const OffsetCommitTopicResponse&) const = default;
};

struct OffsetCommitResponse {
  std::int32_t throttle_time_ms = 0;  // v3+
  std::vector<OffsetCommitTopicResponse> topics;

  bool operator==(const OffsetCommitResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions().
void write_body(Writer& w, const OffsetCommitRequest& req, std::int16_t version);
OffsetCommitRequest read_offset_commit_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const OffsetCommitResponse& resp, std::int16_t version);
OffsetCommitResponse read_offset_commit_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
