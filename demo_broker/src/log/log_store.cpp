#include "log/log_store.hpp"

#include <stdexcept>
#include <type_traits>

namespace purgatory::broker {

bool is_valid_topic_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 249 || name == "." || name == "..") return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

LogStore::LogStore(std::int32_t partitions, std::size_t followers, std::size_t retention_bytes,
                   std::size_t max_producers)
    : partitions_(partitions),
      followers_(followers),
      retention_bytes_(retention_bytes),
      max_producers_(max_producers) {
  if (partitions < 1) {
    throw std::invalid_argument("LogStore: partitions = " + std::to_string(partitions) +
                                " (a topic needs at least one partition)");
  }
  if (max_producers == 0) {
    throw std::invalid_argument("LogStore: max_producers = 0 (at least one is needed)");
  }
}

std::vector<PartitionLog>* LogStore::get_or_create(const std::string& topic) {
  if (const auto it = topics_.find(topic); it != topics_.end()) return &it->second;
  if (!is_valid_topic_name(topic)) return nullptr;
  std::vector<PartitionLog> logs;
  logs.reserve(static_cast<std::size_t>(partitions_));
  for (std::int32_t i = 0; i < partitions_; ++i)
    logs.emplace_back(followers_, retention_bytes_, max_producers_);
  return &topics_.emplace(topic, std::move(logs)).first->second;
}

namespace {

// The one lookup behind both find()s, const or not.
template <class Topics>
auto* find_in(Topics& topics, const std::string& topic, std::int32_t partition) {
  using Log = std::remove_reference_t<decltype(topics.begin()->second.front())>;
  const auto it = topics.find(topic);
  if (it == topics.end() || partition < 0 ||
      static_cast<std::size_t>(partition) >= it->second.size()) {
    return static_cast<Log*>(nullptr);
  }
  return &it->second[static_cast<std::size_t>(partition)];
}

}  // namespace

PartitionLog* LogStore::find(const std::string& topic, std::int32_t partition) {
  return find_in(topics_, topic, partition);
}

const PartitionLog* LogStore::find(const TopicPartition& tp) const {
  return find_in(topics_, tp.topic, tp.partition);
}

}  // namespace purgatory::broker
