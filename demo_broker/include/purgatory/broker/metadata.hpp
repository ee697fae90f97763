// Metadata (key 3), versions 0..4: which brokers exist and who leads each partition.
//
// Request: topics (v1+: null = all topics, empty = none; v0: empty = all, so v0 cannot ask for
// "no topics"), allow_auto_topic_creation (v4+). Response, per MetadataResponse.json:
// throttle_time_ms (v3+), brokers [node_id, host, port, rack (v1+, nullable)], cluster_id (v2+,
// nullable), controller_id (v1+), topics [error_code, name, is_internal (v1+), partitions
// [error_code, partition_index, leader_id, replica_nodes, isr_nodes]].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "purgatory/broker/errors.hpp"
#include "purgatory/broker/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct MetadataRequest {
  // nullopt = all topics. Decoding v0 maps its empty array (all topics) to nullopt too, so the
  // server reads one meaning whatever the version.
  std::optional<std::vector<std::string>> topics;
  bool allow_auto_topic_creation = true;  // v4+; Kafka's default below v4

  bool operator==(const MetadataRequest&) const = default;
};

struct MetadataBroker {
  std::int32_t node_id = 0;
  std::string host;
  std::int32_t port = 0;
  std::optional<std::string> rack;  // v1+

  bool operator==(const MetadataBroker&) const = default;
};

struct MetadataPartition {
  Errc error_code = Errc::none;
  std::int32_t partition_index = 0;
  std::int32_t leader_id = -1;
  std::vector<std::int32_t> replica_nodes;
  std::vector<std::int32_t> isr_nodes;

  bool operator==(const MetadataPartition&) const = default;
};

struct MetadataTopic {
  Errc error_code = Errc::none;
  std::string name;
  bool is_internal = false;  // v1+
  std::vector<MetadataPartition> partitions;

  bool operator==(const MetadataTopic&) const = default;
};

// Fields a version lacks are not written and decode to their defaults, as Kafka treats its
// "ignorable" fields.
struct MetadataResponse {
  std::int32_t throttle_time_ms = 0;  // v3+
  std::vector<MetadataBroker> brokers;
  std::optional<std::string> cluster_id;  // v2+
  std::int32_t controller_id = -1;        // v1+
  std::vector<MetadataTopic> topics;

  bool operator==(const MetadataResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions(). write_body throws
// std::invalid_argument for what the version cannot say: an empty (non-null) topic list at v0, or
// allow_auto_topic_creation == false below v4 (Kafka's field is not ignorable).
void write_body(Writer& w, const MetadataRequest& req, std::int16_t version);
MetadataRequest read_metadata_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const MetadataResponse& resp, std::int16_t version);
MetadataResponse read_metadata_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
