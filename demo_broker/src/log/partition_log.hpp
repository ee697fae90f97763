// PartitionLog: one partition of the demo broker's in-memory log, with its simulated followers.
//
// Record batches are kept exactly as the producer sent them (magic 2), with only baseOffset
// rewritten, so a fetch response is a concatenation of stored batches and no CRC is recomputed.
// Consumers see data only below the high watermark (HW), which is the smallest offset every
// simulated follower has replicated: min(log end offset, each follower's offset), as in Kafka.
//
// Each batch remembers its byte position in the partition's history (a running sum), so "how
// many bytes could a fetch from offset X read below the HW" is two lookups, not a walk: the
// fetch purgatory asks it on every check.
//
// Retention: once the partition holds more than `retention_bytes`, the oldest batches are
// dropped (the log start offset moves up), so a long-running demo does not grow without bound.
//
// Idempotent producers: a batch carrying a producer id is checked against the partition's
// ProducerStateTable and appended (or recognised as a retry) in the same call, so nothing can come
// between the duplicate check and the append.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "log/producer_state.hpp"
#include "protocol/errors.hpp"
#include "protocol/record_batch.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// What became of a batch given to PartitionLog::append(). A plain value, thread-compatible.
struct AppendResult {
  // none: appended, or a duplicate answered with the original's offsets; else refused (the
  // idempotent producer's error) and nothing appended.
  Errc error = Errc::none;
  std::int64_t base_offset = -1;  // the batch's first offset (the original's, for a duplicate)
  std::int64_t next_offset =
      -1;                       // one past its last offset: what acks=-1 waits for the HW to reach
  bool duplicate = false;       // a retry of a remembered batch: nothing appended
  std::string why;              // for a refusal or a duplicate (ProducerCheck::why)
  bool producer_added = false;  // the partition started remembering this producer
  bool producer_forgotten = false;  // and forgot another to make room
};

// Thread-compatible: the broker's io thread owns every PartitionLog.
class PartitionLog {
 public:
  // Producers whose state a partition keeps by default (see ProducerStateTable).
  static constexpr std::size_t kDefaultMaxProducers = 1000;

  // `followers` simulated replicas (0: the HW follows the log end at once). `retention_bytes` 0
  // keeps everything. `max_producers` (>= 1): idempotent producers remembered.
  PartitionLog(std::size_t followers, std::size_t retention_bytes,
               std::size_t max_producers = kDefaultMaxProducers);

  // Appends one batch that passed validate_record_batches() with `info`; rewrites its baseOffset
  // to the log end offset. A batch of an idempotent producer (info.producer.idempotent()) is first
  // checked against the producer's state (ProducerStateTable): a duplicate is answered with the
  // original's offsets and not appended, a refused one appends nothing. Transactional batches are
  // the caller's to refuse (this log does not speak transactions).
  AppendResult append(Bytes batch, const RecordSetInfo& info);
  // A batch of no producer (the non-idempotent path): appends it, returns its base offset.
  std::int64_t append(Bytes batch, std::int64_t offset_count, std::int64_t max_timestamp);

  // Follower `follower` (< followers()) has replicated every offset below `offset`. Returns true
  // when this moved the high watermark.
  bool update_follower(std::size_t follower, std::int64_t offset);

  [[nodiscard]] std::int64_t log_start_offset() const noexcept { return log_start_; }
  [[nodiscard]] std::int64_t log_end_offset() const noexcept { return log_end_; }
  [[nodiscard]] std::int64_t high_watermark() const noexcept { return high_watermark_; }
  [[nodiscard]] std::size_t followers() const noexcept { return follower_offsets_.size(); }
  [[nodiscard]] std::int64_t follower_offset(std::size_t follower) const {
    return follower_offsets_.at(follower);
  }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_bytes_; }
  [[nodiscard]] std::size_t batch_count() const noexcept { return batches_.size(); }

  // log_start_offset() <= offset <= log_end_offset(): a fetch from there is in range.
  [[nodiscard]] bool in_range(std::int64_t offset) const noexcept {
    return offset >= log_start_ && offset <= log_end_;
  }

  // Bytes of the batches a consumer fetching from `offset` could read now: from the batch holding
  // `offset` up to the HW. Precondition: in_range(offset).
  [[nodiscard]] std::size_t bytes_available(std::int64_t offset) const;

  // Whole batches below the HW, starting with the one holding `offset`, while their total stays
  // within `max_bytes`; with `min_one`, the first batch is returned even when it alone is larger
  // (Kafka's KIP-74 rule, so a big batch cannot stall a consumer). Precondition: in_range(offset).
  [[nodiscard]] Bytes read(std::int64_t offset, std::size_t max_bytes, bool min_one) const;

  // The first offset whose batch has a max timestamp >= `timestamp`, or nullopt (ListOffsets).
  [[nodiscard]] std::optional<std::int64_t> offset_for_timestamp(std::int64_t timestamp) const;

  // The idempotent producers this partition remembers.
  [[nodiscard]] const ProducerStateTable& producers() const noexcept { return producers_; }

 private:
  struct Batch {
    std::int64_t base_offset = 0;
    std::int64_t next_offset = 0;  // one past the batch's last offset
    std::int64_t max_timestamp = -1;
    std::uint64_t position = 0;  // bytes appended to this partition before this batch
    Bytes bytes;
  };

  // The batch holding `offset`, or batches_.end() when offset >= the log end.
  [[nodiscard]] std::deque<Batch>::const_iterator batch_holding(std::int64_t offset) const;
  // History position of `offset`, a batch boundary or the log end.
  [[nodiscard]] std::uint64_t position_of(std::int64_t offset) const;
  void enforce_retention();

  std::deque<Batch> batches_;
  ProducerStateTable producers_;
  std::vector<std::int64_t> follower_offsets_;
  std::size_t retention_bytes_;
  std::size_t size_bytes_ = 0;        // bytes held now
  std::uint64_t appended_bytes_ = 0;  // bytes ever appended: the position of the log end
  std::int64_t log_start_ = 0;
  std::int64_t log_end_ = 0;
  std::int64_t high_watermark_ = 0;
};

}  // namespace purgatory::broker
