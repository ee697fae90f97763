// OffsetStore: one group's committed offsets, per partition, in memory (Kafka keeps them in the
// __consumer_offsets topic and a cache of it; this demo has only the cache). A consumer that
// starts on a partition asks for its group's committed offset (OffsetFetch) and resumes there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/topic_partition.hpp"

namespace purgatory::broker {

// What was committed for one partition.
struct CommittedOffset {
  std::int64_t offset = -1;
  std::int32_t leader_epoch = -1;
  std::string metadata;

  bool operator==(const CommittedOffset&) const = default;
};

// Thread-compatible.
class OffsetStore {
 public:
  // Replaces whatever was committed for `tp`.
  void commit(const TopicPartition& tp, CommittedOffset committed);
  [[nodiscard]] std::optional<CommittedOffset> get(const TopicPartition& tp) const;
  // Every committed partition, sorted by topic then partition.
  [[nodiscard]] std::vector<std::pair<TopicPartition, CommittedOffset>> all() const;
  [[nodiscard]] bool empty() const noexcept { return offsets_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return offsets_.size(); }

 private:
  std::unordered_map<TopicPartition, CommittedOffset, TopicPartitionHash> offsets_;
};

}  // namespace purgatory::broker
