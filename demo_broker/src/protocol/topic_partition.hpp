// TopicPartition: the key the broker's purgatories watch operations on, as in Kafka's
// DelayedFetch and DelayedProduce (TopicPartitionOperationKey).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace purgatory::broker {

// A plain value type, thread-compatible.
struct TopicPartition {
  std::string topic;
  std::int32_t partition = 0;

  bool operator==(const TopicPartition&) const = default;
};

struct TopicPartitionHash {
  std::size_t operator()(const TopicPartition& tp) const noexcept {
    const std::size_t h = std::hash<std::string>{}(tp.topic);
    return h ^
           (std::hash<std::int32_t>{}(tp.partition) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
  }
};

}  // namespace purgatory::broker
