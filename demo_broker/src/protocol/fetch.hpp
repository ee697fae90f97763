// Fetch (key 1), version 4 only: the first version whose responses carry record batches (magic 2)
// and transactional fields.
//
// Request: replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, topics [topic,
// partitions [partition, fetch_offset, partition_max_bytes]]. Response: throttle_time_ms,
// responses [topic, partitions [partition_index, error_code, high_watermark, last_stable_offset,
// aborted_transactions (nullable) [producer_id, first_offset], records (nullable bytes)]].
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct FetchPartition {
  std::int32_t partition = 0;
  std::int64_t fetch_offset = 0;
  std::int32_t partition_max_bytes = 1024 * 1024;

  bool operator==(const FetchPartition&) const = default;
};

struct FetchTopic {
  std::string topic;
  std::vector<FetchPartition> partitions;

  bool operator==(const FetchTopic&) const = default;
};

struct FetchRequest {
  std::int32_t replica_id = -1;  // -1: a consumer, not a follower broker
  std::int32_t max_wait_ms = 500;
  std::int32_t min_bytes = 1;
  std::int32_t max_bytes = std::numeric_limits<std::int32_t>::max();
  std::int8_t isolation_level = 0;  // 0 READ_UNCOMMITTED, 1 READ_COMMITTED
  std::vector<FetchTopic> topics;

  bool operator==(const FetchRequest&) const = default;
};

struct AbortedTransaction {
  std::int64_t producer_id = 0;
  std::int64_t first_offset = 0;

  bool operator==(const AbortedTransaction&) const = default;
};

struct FetchPartitionResponse {
  std::int32_t partition_index = 0;
  Errc error_code = Errc::none;
  std::int64_t high_watermark = 0;
  std::int64_t last_stable_offset = -1;
  std::optional<std::vector<AbortedTransaction>> aborted_transactions;
  std::optional<Bytes> records;  // zero or more record batches; brokers may cut the last one short

  bool operator==(const FetchPartitionResponse&) const = default;
};

struct FetchTopicResponse {
  std::string topic;
  std::vector<FetchPartitionResponse> partitions;

  bool operator==(const FetchTopicResponse&) const = default;
};

struct FetchResponse {
  std::int32_t throttle_time_ms = 0;
  std::vector<FetchTopicResponse> responses;

  bool operator==(const FetchResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions() (4).
void write_body(Writer& w, const FetchRequest& req, std::int16_t version);
FetchRequest read_fetch_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const FetchResponse& resp, std::int16_t version);
FetchResponse read_fetch_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
