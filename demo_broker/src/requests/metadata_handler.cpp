#include "requests/metadata_handler.hpp"

#include <initializer_list>
#include <utility>

#include <fmt/format.h>

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

void MetadataHandler::handle(const ResponseSlot& slot, const ApiVersionsRequest& req) {
  ApiVersionsResponse resp;
  resp.api_keys = broker_api_versions();
  const std::string how =
      req.client_software_name.empty()
          ? std::string("ok")
          : fmt::format("ok, client {} {}", req.client_software_name, req.client_software_version);
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id), how);
}

void MetadataHandler::handle(const ResponseSlot& slot, const MetadataRequest& req) {
  MetadataResponse resp;
  const MetadataBroker self = self_();
  resp.brokers.push_back(self);
  resp.cluster_id = cluster_id_;
  resp.controller_id = self.node_id;
  if (req.include_cluster_authorized_operations) {
    resp.cluster_authorized_operations = kClusterOperations;
  }
  std::size_t created = 0;
  if (!req.topics) {
    for (const auto& [name, logs] : log_.topics())
      resp.topics.push_back(describe(req, name, logs, self.node_id));
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
        logger_.event(fmt::format("created topic {} with {} partition(s)", name, logs->size()));
      }
      resp.topics.push_back(describe(req, name, *logs, self.node_id));
    }
  }
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id),
                     fmt::format("{} topic(s){}", resp.topics.size(),
                                 created > 0 ? fmt::format(", {} created", created) : ""));
}

MetadataTopic MetadataHandler::describe(const MetadataRequest& req, const std::string& name,
                                        const std::vector<PartitionLog>& logs,
                                        std::int32_t node_id) const {
  // No replica is ever offline and the leader never changes, so offline_replicas (v5+) stays
  // empty and leader_epoch (v7+) unknown (-1), as the batches' partitionLeaderEpoch is.
  MetadataTopic t;
  t.name = name;
  if (req.include_topic_authorized_operations) t.topic_authorized_operations = kTopicOperations;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    MetadataPartition p;
    p.partition_index = static_cast<std::int32_t>(i);
    p.leader_id = node_id;
    // The simulated followers are not brokers a client could reach: only we are listed.
    p.replica_nodes = {node_id};
    p.isr_nodes = {node_id};
    t.partitions.push_back(std::move(p));
  }
  return t;
}

}  // namespace purgatory::broker
