// OutcomeLog: the most recent outcomes of parked requests ("fetch on demo-0 completed early after
// 312 ms (min_bytes reached)"), for the live view. A ring of kCapacity events: a page polling for
// hours costs the broker the same few kilobytes; each event carries a sequence number, so a poller
// asks only for what it has not seen.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>

namespace purgatory::broker {

// A plain value, thread-compatible.
struct OutcomeEvent {
  std::uint64_t seq = 0;  // 1, 2, ... in the order they happened
  std::chrono::steady_clock::time_point at;
  std::string purgatory;  // "fetch" or "produce"
  std::string key;        // the first partition watched ("demo-0"), "+N" when more
  std::string outcome;    // "completed early", "expired", "shut down", "abandoned"
  double waited_ms = 0;   // from the request's arrival to its outcome
  std::string why;        // "min_bytes reached: 1080 of 1000 bytes", ...
};

// Call only from the broker's io thread.
class OutcomeLog {
 public:
  static constexpr std::size_t kCapacity = 200;

  void add(OutcomeEvent event) {
    event.seq = ++last_seq_;
    if (events_.size() == kCapacity) events_.pop_front();
    events_.push_back(std::move(event));
  }
  // Calls fn(const OutcomeEvent&) on each event still held with seq > `after`, oldest first.
  template <class F>
  void for_each_after(std::uint64_t after, F&& fn) const {
    for (const OutcomeEvent& e : events_) {
      if (e.seq > after) fn(e);
    }
  }
  [[nodiscard]] std::uint64_t last_seq() const noexcept { return last_seq_; }
  [[nodiscard]] std::size_t size() const noexcept { return events_.size(); }

 private:
  std::deque<OutcomeEvent> events_;
  std::uint64_t last_seq_ = 0;
};

}  // namespace purgatory::broker
