// Metadata (key 3), versions 0..8: which brokers exist and who leads each partition. v8 is the
// last version before the flexible ones, what clients pinned to Kafka 2.x send.
//
// Request: topics (v1+: null = all topics, empty = none; v0: empty = all, so v0 cannot ask for
// "no topics"), allow_auto_topic_creation (v4+), include_cluster_authorized_operations and
// include_topic_authorized_operations (v8+). Response, per MetadataResponse.json:
// throttle_time_ms (v3+), brokers [node_id, host, port, rack (v1+, nullable)], cluster_id (v2+,
// nullable), controller_id (v1+), topics [error_code, name, is_internal (v1+), partitions
// [error_code, partition_index, leader_id, leader_epoch (v7+), replica_nodes, isr_nodes,
// offline_replicas (v5+)], topic_authorized_operations (v8+)], cluster_authorized_operations
// (v8+). v6 is v5 again (it only changed when a throttled response is sent).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Kafka's value for authorized operations a request did not ask for (INT32_MIN).
inline constexpr std::int32_t kAuthorizedOperationsNotRequested = -2147483647 - 1;

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct MetadataRequest {
  // nullopt = all topics. Decoding v0 maps its empty array (all topics) to nullopt too, so the
  // server reads one meaning whatever the version.
  std::optional<std::vector<std::string>> topics;
  bool allow_auto_topic_creation = true;               // v4+; Kafka's default below v4
  bool include_cluster_authorized_operations = false;  // v8+
  bool include_topic_authorized_operations = false;    // v8+

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
  std::vector<std::int32_t> offline_replicas;  // v5+
  std::int32_t leader_epoch = -1;              // v7+ (on the wire after leader_id); -1: unknown

  bool operator==(const MetadataPartition&) const = default;
};

struct MetadataTopic {
  Errc error_code = Errc::none;
  std::string name;
  bool is_internal = false;  // v1+
  std::vector<MetadataPartition> partitions;
  // v8+: a bit per AclOperation code the client may perform on the topic; kNotRequested unless
  // the request asked (include_topic_authorized_operations).
  std::int32_t topic_authorized_operations = kAuthorizedOperationsNotRequested;

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
  std::int32_t cluster_authorized_operations = kAuthorizedOperationsNotRequested;  // v8+

  bool operator==(const MetadataResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions(). write_body throws
// std::invalid_argument for what the version cannot say: an empty (non-null) topic list at v0, or
// allow_auto_topic_creation == false below v4 (Kafka's field is not ignorable), or an
// include_*_authorized_operations set below v8.
void write_body(Writer& w, const MetadataRequest& req, std::int16_t version);
MetadataRequest read_metadata_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const MetadataResponse& resp, std::int16_t version);
MetadataResponse read_metadata_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
