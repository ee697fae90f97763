// ListOffsets (key 2), version 1 only: the offset for a timestamp, in practice the earliest (-2)
// or latest (-1) offset of a partition, which consumers ask for before their first fetch.
//
// Request: replica_id, topics [name, partitions [partition_index, timestamp]]. Response: topics
// [name, partitions [partition_index, error_code, timestamp, offset]].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

inline constexpr std::int64_t kLatestTimestamp = -1;    // the log end offset
inline constexpr std::int64_t kEarliestTimestamp = -2;  // the log start offset

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct ListOffsetsPartition {
  std::int32_t partition_index = 0;
  std::int64_t timestamp = kLatestTimestamp;

  bool operator==(const ListOffsetsPartition&) const = default;
};

struct ListOffsetsTopic {
  std::string name;
  std::vector<ListOffsetsPartition> partitions;

  bool operator==(const ListOffsetsTopic&) const = default;
};

struct ListOffsetsRequest {
  std::int32_t replica_id = -1;
  std::vector<ListOffsetsTopic> topics;

  bool operator==(const ListOffsetsRequest&) const = default;
};

struct ListOffsetsPartitionResponse {
  std::int32_t partition_index = 0;
  Errc error_code = Errc::none;
  std::int64_t timestamp = -1;
  std::int64_t offset = -1;

  bool operator==(const ListOffsetsPartitionResponse&) const = default;
};

struct ListOffsetsTopicResponse {
  std::string name;
  std::vector<ListOffsetsPartitionResponse> partitions;

  bool operator==(const ListOffsetsTopicResponse&) const = default;
};

struct ListOffsetsResponse {
  std::vector<ListOffsetsTopicResponse> topics;

  bool operator==(const ListOffsetsResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions() (1).
void write_body(Writer& w, const ListOffsetsRequest& req, std::int16_t version);
ListOffsetsRequest read_list_offsets_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const ListOffsetsResponse& resp, std::int16_t version);
ListOffsetsResponse read_list_offsets_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
