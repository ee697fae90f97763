// DelayedFetch: Kafka's DelayedFetch for the demo broker. A Fetch that cannot be answered with
// min_bytes waits in the fetch purgatory, watched on each of its topic-partitions, and completes
// when a high-watermark move makes enough bytes readable (try_complete), or when max_wait_ms
// passes (then it answers with whatever there is, possibly nothing).
//
// The answer is not built when the operation completes: on_complete() fills its response slot
// with a builder (Connection::respond_deferred), which the connection runs only when every earlier
// response on it has been written. So a client that pipelines many Fetches and never reads holds
// one encoded response in the broker, not one per Fetch. The answer then serves the log as it is
// when it is built, which is still a correct Kafka answer: it serves only data below the high
// watermark at read time, exactly what a Fetch read at that moment would get, and since the high
// watermark only moves up, an early completion still serves at least the data that woke it. If
// retention removed the fetch offset in the meantime, the answer is OFFSET_OUT_OF_RANGE, the
// error Kafka would give at that time.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "log/log_store.hpp"
#include "protocol/fetch.hpp"
#include "purgatory/delayed_operation.hpp"
#include "requests/outcome_log.hpp"
#include "requests/responder.hpp"

namespace purgatory::broker {

// Bytes readable now below the HW, per partition capped at its partition_max_bytes (Kafka's
// DelayedFetch accounting). Unknown partitions and out-of-range offsets count 0.
[[nodiscard]] std::size_t fetchable_bytes(const LogStore& log, const FetchRequest& req);
// True when some partition would be answered with an error (Kafka answers such fetches at once).
[[nodiscard]] bool fetch_has_error(const LogStore& log, const FetchRequest& req);
// True when the fetch needs no waiting: max_wait_ms <= 0, min_bytes <= 0, an error, or enough
// bytes.
[[nodiscard]] bool fetch_satisfied(const LogStore& log, const FetchRequest& req);

// The response from the log as it is now: whole batches below the HW, within partition_max_bytes
// and the request's max_bytes (already capped at the broker's fetch_max_bytes by the handler),
// except that the first batch of the first partition with data is always returned whole (KIP-74).
// Adds the record bytes to `total_bytes`.
[[nodiscard]] FetchResponse build_fetch_response(const LogStore& log, const FetchRequest& req,
                                                 std::size_t& total_bytes);

// "demo-0" for a fetch of one partition, "demo-0 +2" for three: how the outcome log names it.
[[nodiscard]] std::string outcome_key(const FetchRequest& req);

// Call only from the broker's io thread (the purgatory's timer expires it there too).
class DelayedFetch final : public DelayedOperation {
 public:
  // `outcomes` (may be null) is told how a parked fetch ended.
  DelayedFetch(const LogStore& log, FetchRequest request, ResponseSlot slot,
               OutcomeLog* outcomes = nullptr);

  // The first try failed: the operation now waits in the purgatory (for the log line).
  void mark_parked() noexcept { parked_ = true; }

 protected:
  bool try_complete() override;
  void on_complete() override;

 private:
  void record_outcome();

  const LogStore& log_;
  const FetchRequest request_;
  const ResponseSlot slot_;
  OutcomeLog* const outcomes_;
  const std::chrono::steady_clock::time_point arrived_ = std::chrono::steady_clock::now();
  bool parked_ = false;
};

}  // namespace purgatory::broker
