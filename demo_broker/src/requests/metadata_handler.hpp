// MetadataHandler: what a client asks about the broker before anything else, answered at once:
// ApiVersions (the apis and versions it speaks) and Metadata (the one broker, its topics and
// partitions, creating the topics a client names, as Kafka's auto.create.topics.enable does).
#pragma once

#include <functional>
#include <string>

#include "log/log_store.hpp"
#include "protocol/codec.hpp"
#include "requests/logger.hpp"
#include "requests/responder.hpp"

namespace purgatory::broker {

// Call only from the broker's io thread.
class MetadataHandler {
 public:
  // `self` tells where clients reach this broker (its port is known once it listens).
  // `log` and `logger` must outlive the handler.
  MetadataHandler(LogStore& log, const Logger& logger, std::string cluster_id,
                  std::function<MetadataBroker()> self)
      : log_(log), logger_(logger), cluster_id_(std::move(cluster_id)), self_(std::move(self)) {}

  void handle(const ResponseSlot& slot, const ApiVersionsRequest& req);
  void handle(const ResponseSlot& slot, const MetadataRequest& req);

 private:
  [[nodiscard]] MetadataTopic describe(const MetadataRequest& req, const std::string& name,
                                       const std::vector<PartitionLog>& logs,
                                       std::int32_t node_id) const;

  LogStore& log_;
  const Logger& logger_;
  const std::string cluster_id_;
  const std::function<MetadataBroker()> self_;
};

}  // namespace purgatory::broker
