#include "log/partition_log.hpp"

#include <algorithm>
#include <cassert>
#include <span>
#include <stdexcept>

#include "protocol/record_batch.hpp"

namespace purgatory::broker {

PartitionLog::PartitionLog(std::size_t followers, std::size_t retention_bytes,
                           std::size_t max_producers)
    : producers_(max_producers),
      follower_offsets_(followers, 0),
      retention_bytes_(retention_bytes) {}

AppendResult PartitionLog::append(Bytes batch, const RecordSetInfo& info) {
  AppendResult out;
  const BatchProducer& producer = info.producer;
  if (producer.idempotent()) {
    ProducerCheck check = producers_.check(producer);
    out.why = std::move(check.why);
    if (check.error != Errc::none) {
      out.error = check.error;
      return out;
    }
    if (check.duplicate) {
      out.duplicate = true;
      out.base_offset = check.duplicate->first_offset;
      out.next_offset = check.duplicate->last_offset + 1;
      return out;
    }
  }
  const std::size_t producers_before = producers_.size();
  out.base_offset = append(std::move(batch), info.offset_count, info.max_timestamp);
  out.next_offset = log_end_;
  if (producer.idempotent()) {
    out.producer_forgotten = producers_.record(producer, out.base_offset, log_end_ - 1);
    out.producer_added = out.producer_forgotten || producers_.size() > producers_before;
  }
  return out;
}

std::int64_t PartitionLog::append(Bytes batch, std::int64_t offset_count,
                                  std::int64_t max_timestamp) {
  if (offset_count <= 0) throw std::invalid_argument("PartitionLog::append: no offsets");
  const std::int64_t base = log_end_;
  assign_base_offsets(std::span<std::uint8_t>(batch), base);
  const std::size_t size = batch.size();
  batches_.push_back(
      Batch{base, base + offset_count, max_timestamp, appended_bytes_, std::move(batch)});
  appended_bytes_ += size;
  size_bytes_ += size;
  log_end_ = base + offset_count;
  if (follower_offsets_.empty()) high_watermark_ = log_end_;
  enforce_retention();
  return base;
}

bool PartitionLog::update_follower(std::size_t follower, std::int64_t offset) {
  std::int64_t& at = follower_offsets_.at(follower);
  at = std::max(at, std::min(offset, log_end_));
  const std::int64_t hw =
      std::min(log_end_, *std::min_element(follower_offsets_.begin(), follower_offsets_.end()));
  if (hw <= high_watermark_) return false;
  high_watermark_ = hw;
  enforce_retention();  // batches held only until replicated may go now
  return true;
}

std::deque<PartitionLog::Batch>::const_iterator PartitionLog::batch_holding(
    std::int64_t offset) const {
  return std::upper_bound(batches_.begin(), batches_.end(), offset,
                          [](std::int64_t o, const Batch& b) { return o < b.next_offset; });
}

std::uint64_t PartitionLog::position_of(std::int64_t offset) const {
  const auto it = batch_holding(offset);
  return it == batches_.end() ? appended_bytes_ : it->position;
}

std::size_t PartitionLog::bytes_available(std::int64_t offset) const {
  assert(in_range(offset));
  if (offset >= high_watermark_) return 0;
  return static_cast<std::size_t>(position_of(high_watermark_) - position_of(offset));
}

Bytes PartitionLog::read(std::int64_t offset, std::size_t max_bytes, bool min_one) const {
  assert(in_range(offset));
  Bytes out;
  for (auto it = batch_holding(offset); it != batches_.end(); ++it) {
    if (it->next_offset > high_watermark_) break;  // not replicated yet: invisible to consumers
    const bool first = out.empty();
    if (out.size() + it->bytes.size() > max_bytes && !(first && min_one)) break;
    out.insert(out.end(), it->bytes.begin(), it->bytes.end());
  }
  return out;
}

std::optional<std::int64_t> PartitionLog::offset_for_timestamp(std::int64_t timestamp) const {
  for (const Batch& b : batches_) {
    if (b.next_offset > high_watermark_) break;
    if (b.max_timestamp >= timestamp) return std::max(b.base_offset, log_start_);
  }
  return std::nullopt;
}

void PartitionLog::enforce_retention() {
  if (retention_bytes_ == 0) return;
  // Keep the newest batch, and anything not yet replicated (a follower may still need it).
  while (batches_.size() > 1 && size_bytes_ > retention_bytes_ &&
         batches_.front().next_offset <= high_watermark_) {
    size_bytes_ -= batches_.front().bytes.size();
    log_start_ = batches_.front().next_offset;
    batches_.pop_front();
  }
}

}  // namespace purgatory::broker
