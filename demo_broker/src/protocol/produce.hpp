// Produce (key 0), versions 3 and 4: v3 is the first version carrying record batches (magic 2);
// v4 is v3 again (a broker may answer KAFKA_STORAGE_ERROR, which this one never does). Clients
// that guess the broker's version from ApiVersions (kafka-python 2.0) take a broker offering
// Metadata v5 for Kafka 1.0 and send Produce v4.
//
// Request: transactional_id (nullable), acks, timeout_ms, topics [name, partitions [index,
// records (nullable bytes)]]. Response: responses [name, partitions [index, error_code,
// base_offset, log_append_time_ms]], throttle_time_ms. A request with acks == 0 gets no response
// at all: the server must not send one.
//
// The records blob is copied out of the frame; validate it with validate_record_batches()
// (record_batch.hpp) before appending it anywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct ProducePartitionData {
  std::int32_t index = 0;
  std::optional<Bytes> records;

  bool operator==(const ProducePartitionData&) const = default;
};

struct ProduceTopicData {
  std::string name;
  std::vector<ProducePartitionData> partitions;

  bool operator==(const ProduceTopicData&) const = default;
};

struct ProduceRequest {
  std::optional<std::string> transactional_id;
  std::int16_t acks = -1;  // 0: no response, 1: leader, -1: all in-sync replicas
  std::int32_t timeout_ms = 30000;
  std::vector<ProduceTopicData> topics;

  bool operator==(const ProduceRequest&) const = default;
};

struct ProducePartitionResponse {
  std::int32_t index = 0;
  Errc error_code = Errc::none;
  std::int64_t base_offset = -1;
  std::int64_t log_append_time_ms = -1;  // -1 for CreateTime topics

  bool operator==(const ProducePartitionResponse&) const = default;
};

struct ProduceTopicResponse {
  std::string name;
  std::vector<ProducePartitionResponse> partitions;

  bool operator==(const ProduceTopicResponse&) const = default;
};

struct ProduceResponse {
  std::vector<ProduceTopicResponse> responses;
  std::int32_t throttle_time_ms = 0;

  bool operator==(const ProduceResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions() (3..4).
void write_body(Writer& w, const ProduceRequest& req, std::int16_t version);
ProduceRequest read_produce_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const ProduceResponse& resp, std::int16_t version);
ProduceResponse read_produce_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
