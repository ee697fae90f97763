#include "offset_store.hpp"

#include <algorithm>
#include <utility>

namespace purgatory::broker {

void OffsetStore::commit(const TopicPartition& tp, CommittedOffset committed) {
  offsets_.insert_or_assign(tp, std::move(committed));
}

std::optional<CommittedOffset> OffsetStore::get(const TopicPartition& tp) const {
  const auto it = offsets_.find(tp);
  if (it == offsets_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<TopicPartition, CommittedOffset>> OffsetStore::all() const {
  std::vector<std::pair<TopicPartition, CommittedOffset>> out(offsets_.begin(), offsets_.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first.topic != b.first.topic ? a.first.topic < b.first.topic
                                          : a.first.partition < b.first.partition;
  });
  return out;
}

}  // namespace purgatory::broker
