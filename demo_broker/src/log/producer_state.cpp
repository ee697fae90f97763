#include "log/producer_state.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace purgatory::broker {

namespace {

// Kafka's inSequence(): the next batch starts one past the last, wrapping after INT32_MAX.
bool in_sequence(std::int32_t last, std::int32_t next) {
  return std::int64_t{next} == std::int64_t{last} + 1 || (next == 0 && last == 0x7FFFFFFF);
}

}  // namespace

ProducerStateTable::ProducerStateTable(std::size_t max_producers) : max_producers_(max_producers) {
  if (max_producers == 0) {
    throw std::invalid_argument("ProducerStateTable: max_producers = 0 (at least one is needed)");
  }
}

ProducerCheck ProducerStateTable::check(const BatchProducer& batch) const {
  ProducerCheck out;
  const std::int32_t first = batch.base_sequence;
  const std::int32_t last = batch.last_sequence();
  const auto it = producers_.find(batch.producer_id);
  if (it == producers_.end()) {
    if (first != 0) {
      out.error = Errc::unknown_producer_id;
      out.why = fmt::format(
          "producer {} has no state on this partition (it never wrote here, or was forgotten) "
          "and its batch starts at sequence {}, not 0",
          batch.producer_id, first);
    }
    return out;
  }
  const Entry& entry = it->second;
  if (batch.producer_epoch == entry.epoch) {
    for (const ProducerBatchEntry& b : entry.batches) {
      if (b.first_sequence == first && b.last_sequence == last) {
        out.duplicate = b;
        out.why = fmt::format(
            "producer {} epoch {} sequences {}..{} were appended at offset {}: a retry, not "
            "appended again",
            batch.producer_id, batch.producer_epoch, first, last, b.first_offset);
        return out;
      }
    }
  }
  if (batch.producer_epoch < entry.epoch) {
    out.error = Errc::invalid_producer_epoch;
    out.why = fmt::format("producer {} epoch {} is older than its current epoch {}",
                          batch.producer_id, batch.producer_epoch, entry.epoch);
    return out;
  }
  if (batch.producer_epoch > entry.epoch) {
    if (first != 0) {
      out.error = Errc::out_of_order_sequence_number;
      out.why = fmt::format("producer {} starts epoch {} at sequence {}, not 0", batch.producer_id,
                            batch.producer_epoch, first);
    }
    return out;
  }
  const std::int32_t expected_after = entry.batches.back().last_sequence;
  if (in_sequence(expected_after, first)) return out;
  if (first <= last && last <= expected_after) {
    // Wholly at or before what was written, but older than the batches remembered.
    out.error = Errc::duplicate_sequence_number;
    out.why = fmt::format(
        "producer {} epoch {} sequences {}..{} were written before the last {} batches this "
        "partition remembers (last sequence {})",
        batch.producer_id, batch.producer_epoch, first, last, kBatchesPerProducer, expected_after);
    return out;
  }
  out.error = Errc::out_of_order_sequence_number;
  out.why =
      fmt::format("producer {} epoch {}: expected sequence {}, got {}..{}", batch.producer_id,
                  batch.producer_epoch,
                  expected_after == 0x7FFFFFFF ? 0 : std::int64_t{expected_after} + 1, first, last);
  return out;
}

bool ProducerStateTable::record(const BatchProducer& batch, std::int64_t first_offset,
                                std::int64_t last_offset) {
  bool forgot = false;
  auto it = producers_.find(batch.producer_id);
  if (it == producers_.end()) {
    if (producers_.size() >= max_producers_) {
      const auto oldest = std::min_element(
          producers_.begin(), producers_.end(),
          [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
      producers_.erase(oldest);
      forgot = true;
    }
    it = producers_.emplace(batch.producer_id, Entry{}).first;
  }
  Entry& entry = it->second;
  if (entry.epoch != batch.producer_epoch) {
    // A new epoch starts the producer's sequences over (Kafka's maybeUpdateProducerEpoch).
    entry.epoch = batch.producer_epoch;
    entry.batches.clear();
  }
  if (entry.batches.size() >= kBatchesPerProducer) entry.batches.erase(entry.batches.begin());
  entry.batches.push_back(
      ProducerBatchEntry{batch.base_sequence, batch.last_sequence(), first_offset, last_offset});
  entry.last_used = ++appends_;
  return forgot;
}

std::vector<ProducerSnapshot> ProducerStateTable::snapshot(std::size_t limit) const {
  std::vector<std::pair<std::uint64_t, ProducerSnapshot>> all;
  all.reserve(producers_.size());
  for (const auto& [id, entry] : producers_) {
    const ProducerBatchEntry& last = entry.batches.back();
    all.push_back({entry.last_used, ProducerSnapshot{id, entry.epoch, last.last_sequence,
                                                     last.last_offset, entry.batches.size()}});
  }
  const std::size_t n = std::min(limit, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<ProducerSnapshot> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(all[i].second);
  return out;
}

}  // namespace purgatory::broker
