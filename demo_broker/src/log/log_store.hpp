// LogStore: the demo broker's topics, each a fixed number of in-memory PartitionLogs.
//
// Topics are created on first use (a Produce or a Metadata request naming them) with the
// configured partition count; Fetch and ListOffsets never create one, they answer
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "log/partition_log.hpp"
#include "protocol/topic_partition.hpp"

namespace purgatory::broker {

// Kafka's rule: 1..249 characters from [a-zA-Z0-9._-], and not "." or "..".
[[nodiscard]] bool is_valid_topic_name(std::string_view name) noexcept;

// Thread-compatible: the broker's io thread owns it.
class LogStore {
 public:
  // Every topic gets `partitions` (>= 1) partitions, each with `followers` simulated followers
  // and room for `max_producers` (>= 1) idempotent producers' state. Throws std::invalid_argument
  // for partitions < 1 or max_producers == 0.
  LogStore(std::int32_t partitions, std::size_t followers, std::size_t retention_bytes,
           std::size_t max_producers = PartitionLog::kDefaultMaxProducers);

  // The partitions of `topic`, creating it if needed; nullptr when the name is invalid.
  std::vector<PartitionLog>* get_or_create(const std::string& topic);
  // nullptr when the topic or the partition does not exist.
  [[nodiscard]] PartitionLog* find(const std::string& topic, std::int32_t partition);
  [[nodiscard]] const PartitionLog* find(const TopicPartition& tp) const;
  [[nodiscard]] bool has_topic(const std::string& topic) const { return topics_.contains(topic); }

  // Topic names in order, with their partition count.
  [[nodiscard]] const std::map<std::string, std::vector<PartitionLog>, std::less<>>& topics()
      const noexcept {
    return topics_;
  }
  [[nodiscard]] std::int32_t partitions_per_topic() const noexcept { return partitions_; }

 private:
  std::int32_t partitions_;
  std::size_t followers_;
  std::size_t retention_bytes_;
  std::size_t max_producers_;
  std::map<std::string, std::vector<PartitionLog>, std::less<>> topics_;
};

}  // namespace purgatory::broker
