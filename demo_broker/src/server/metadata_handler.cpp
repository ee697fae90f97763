// The requests the broker always answers at once: ApiVersions, Metadata, ListOffsets.
#include <initializer_list>

#include <fmt/format.h>

#include "purgatory/broker/broker.hpp"
#include "requests/responder.hpp"

namespace purgatory::broker {

namespace {

// What Kafka answers for authorized operations when it has no authorizer: everything a topic or
// the cluster supports (AclEntry.supportedOperations), one bit per AclOperation code.
constexpr std::int32_t operation_bits(std::initializer_list<int> codes) {
  std::int32_t bits = 0;
  for (const int c : codes)
    bits |= std::int32_t{1} << c;
  return bits;
}
// READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11
constexpr std::int32_t kTopicOperations = operation_bits({3, 4, 5, 6, 7, 8, 10, 11});
// CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
// IDEMPOTENT_WRITE 12
constexpr std::int32_t kClusterOperations = operation_bits({5, 7, 8, 9, 10, 11, 12});

}  // namespace

void Broker::handle_api_versions(const ResponseSlot& slot, const ApiVersionsRequest& req) {
  ApiVersionsResponse resp;
  resp.api_keys = broker_api_versions();
  const std::string how =
      req.client_software_name.empty()
          ? std::string("ok")
          : fmt::format("ok, client {} {}", req.client_software_name, req.client_software_version);
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id), how);
}

void Broker::handle_metadata(const ResponseSlot& slot, const MetadataRequest& req) {
  MetadataResponse resp;
  resp.brokers.push_back(
      MetadataBroker{config_.node_id, advertised_host_, static_cast<std::int32_t>(port()), {}});
  resp.cluster_id = config_.cluster_id;
  resp.controller_id = config_.node_id;
  if (req.include_cluster_authorized_operations) {
    resp.cluster_authorized_operations = kClusterOperations;
  }
  // No replica is ever offline and the leader never changes, so offline_replicas (v5+) stays
  // empty and leader_epoch (v7+) unknown (-1), as the batches' partitionLeaderEpoch is.
  const auto describe = [this, &req](const std::string& name,
                                     const std::vector<PartitionLog>& logs) {
    MetadataTopic t;
    t.name = name;
    if (req.include_topic_authorized_operations) t.topic_authorized_operations = kTopicOperations;
    for (std::size_t i = 0; i < logs.size(); ++i) {
      MetadataPartition p;
      p.partition_index = static_cast<std::int32_t>(i);
      p.leader_id = config_.node_id;
      // The simulated followers are not brokers a client could reach: only we are listed.
      p.replica_nodes = {config_.node_id};
      p.isr_nodes = {config_.node_id};
      t.partitions.push_back(std::move(p));
    }
    return t;
  };
  std::size_t created = 0;
  if (!req.topics) {
    for (const auto& [name, logs] : log_.topics())
      resp.topics.push_back(describe(name, logs));
  } else {
    for (const std::string& name : *req.topics) {
      // Unlike Kafka, allow_auto_topic_creation=false (librdkafka consumers send it) does not
      // stop the creation: a consumer started before its producer must find its topic.
      const bool existed = log_.has_topic(name);
      const std::vector<PartitionLog>* logs = log_.get_or_create(name);
      if (logs == nullptr) {
        MetadataTopic t;
        t.name = name;
        t.error_code = Errc::invalid_topic_exception;
        resp.topics.push_back(std::move(t));
        continue;
      }
      if (!existed) {
        ++created;
        event(fmt::format("created topic {} with {} partition(s)", name, logs->size()));
      }
      resp.topics.push_back(describe(name, *logs));
    }
  }
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id),
                     fmt::format("{} topic(s){}", resp.topics.size(),
                                 created > 0 ? fmt::format(", {} created", created) : ""));
}

void Broker::handle_list_offsets(const ResponseSlot& slot, const ListOffsetsRequest& req) {
  ListOffsetsResponse resp;
  for (const ListOffsetsTopic& t : req.topics) {
    ListOffsetsTopicResponse& tr = resp.topics.emplace_back();
    tr.name = t.name;
    for (const ListOffsetsPartition& p : t.partitions) {
      ListOffsetsPartitionResponse& pr = tr.partitions.emplace_back();
      pr.partition_index = p.partition_index;
      const PartitionLog* pl = log_.find(t.name, p.partition_index);
      if (pl == nullptr) {
        pr.error_code = Errc::unknown_topic_or_partition;
        continue;
      }
      if (p.timestamp == kEarliestTimestamp) {
        pr.offset = pl->log_start_offset();
      } else if (p.timestamp == kLatestTimestamp) {
        pr.offset = pl->high_watermark();  // what a consumer may read up to
      } else if (const auto offset = pl->offset_for_timestamp(p.timestamp)) {
        pr.offset = *offset;
        pr.timestamp = p.timestamp;
      }
    }
  }
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id), "ok");
}

}  // namespace purgatory::broker
