// OffsetFetch (key 9), versions 0..5: a consumer asks where its group left off, per partition,
// before it starts fetching them.
//
// Request: group_id, topics [name, partition_indexes] (v2+: null asks for every committed
// partition of the group). Response, per OffsetFetchResponse.json: throttle_time_ms (v3+), topics
// [name, partitions [partition_index, committed_offset, committed_leader_epoch (v5+), metadata
// (nullable), error_code]], error_code (v2+). A partition with nothing committed answers offset
// -1, metadata "" and no error. The flexible v6+ are not spoken.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct OffsetFetchTopic {
  std::string name;
  std::vector<std::int32_t> partition_indexes;

  bool operator==(const OffsetFetchTopic&) const = default;
};

struct OffsetFetchRequest {
  std::string group_id;
  std::optional<std::vector<OffsetFetchTopic>> topics;  // null (v2+): all committed partitions

  bool operator==(const OffsetFetchRequest&) const = default;
};

struct OffsetFetchPartitionResponse {
  std::int32_t partition_index = 0;
  std::int64_t committed_offset = -1;
  std::int32_t committed_leader_epoch = -1;  // v5+
  std::optional<std::string> metadata;
  Errc error_code = Errc::none;

  bool operator==(const OffsetFetchPartitionResponse&) const = default;
};

struct OffsetFetchTopicResponse {
  std::string name;
  std::vector<OffsetFetchPartitionResponse> partitions;

  bool operator==(const OffsetFetchTopicResponse&) const = default;
};

struct OffsetFetchResponse {
  std::int32_t throttle_time_ms = 0;  // v3+
  std::vector<OffsetFetchTopicResponse> topics;
  Errc error_code = Errc::none;  // v2+

  bool operator==(const OffsetFetchResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions(). write_body throws
// std::invalid_argument for null topics below v2 (v0 and v1 cannot say "all").
void write_body(Writer& w, const OffsetFetchRequest& req, std::int16_t version);
OffsetFetchRequest read_offset_fetch_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const OffsetFetchResponse& resp, std::int16_t version);
OffsetFetchResponse read_offset_fetch_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
