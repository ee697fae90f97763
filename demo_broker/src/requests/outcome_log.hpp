// OutcomeLog: the most recent outcomes of parked requests ("fetch on demo-0 completed early after
// 312 ms (min_bytes reached)") and of the group purgatories' operations ("member m-2 of g1 expired
// by the heartbeat purgatory after 10 s without a heartbeat; g1 rebalances"), for the live view.
// A ring of kCapacity events per purgatory, so that consumers' long polls expiring twice a second
// do not push a rebalance out of the log, and a page polling for hours costs the broker the same
// few kilobytes. Each event carries a sequence number, so a poller asks only for what it has not
// seen.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace purgatory::broker {

// A plain value, thread-compatible.
struct OutcomeEvent {
  std::uint64_t seq = 0;  // 1, 2, ... in the order they happened
  std::chrono::steady_clock::time_point at;
  std::string purgatory;  // "fetch", "produce", "join" or "heartbeat"
  // The first partition watched ("demo-0", "+N" when more), the group ("g1") or the member
  // ("g1/m-2").
  std::string key;
  std::string outcome;   // "completed early", "expired", "shut down", "abandoned", "delay over"
  double waited_ms = 0;  // from the request's arrival to its outcome
  std::string why;       // "min_bytes reached: 1080 of 1000 bytes", ...
  // The whole sentence, when the default "<purgatory> on <key> <outcome> after <waited> ms
  // (<why>)" does not say it well (the group purgatories' outcomes); "" for the default.
  std::string text;
};

// Call only from the broker's io thread.
class OutcomeLog {
 public:
  static constexpr std::size_t kCapacity = 200;  // per purgatory

  void add(OutcomeEvent event) {
    event.seq = ++last_seq_;
    std::deque<OutcomeEvent>& ring = ring_of(event.purgatory);
    if (ring.size() == kCapacity) ring.pop_front();
    ring.push_back(std::move(event));
  }
  // Calls fn(const OutcomeEvent&) on each event still held with seq > `after`, oldest first.
  template <class F>
  void for_each_after(std::uint64_t after, F&& fn) const {
    std::vector<const OutcomeEvent*> events;
    for (const auto& [purgatory, ring] : rings_) {
      for (auto it = ring.rbegin(); it != ring.rend() && it->seq > after; ++it)
        events.push_back(&*it);
    }
    std::sort(events.begin(), events.end(),
              [](const OutcomeEvent* a, const OutcomeEvent* b) { return a->seq < b->seq; });
    for (const OutcomeEvent* e : events)
      fn(*e);
  }
  [[nodiscard]] std::uint64_t last_seq() const noexcept { return last_seq_; }
  [[nodiscard]] std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const auto& [purgatory, ring] : rings_)
      n += ring.size();
    return n;
  }

 private:
  std::deque<OutcomeEvent>& ring_of(const std::string& purgatory) {
    for (auto& [name, ring] : rings_) {
      if (name == purgatory) return ring;
    }
    return rings_.emplace_back(purgatory, std::deque<OutcomeEvent>{}).second;
  }

  // One per purgatory name (four: the names come from the broker's code, not from clients).
  std::vector<std::pair<std::string, std::deque<OutcomeEvent>>> rings_;
  std::uint64_t last_seq_ = 0;
};

}  // namespace purgatory::broker
