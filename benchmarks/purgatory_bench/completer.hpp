// The completer: the thread that completes requests when their latency has passed, as Kafka's
// harness does with force_complete. One per arriving thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "stats.hpp"

namespace purgatory_bench {

// A heap by due time, fed in batches. add() and flush() from the arriving thread only.
template <class Handle, class CompleteFn>
class Completer {
 public:
  explicit Completer(CompleteFn complete) : complete_(std::move(complete)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Completer() { stop(); }

  // Buffers on the caller's side; flush() hands a whole batch over under one lock.
  void add(Clock::time_point due, Handle handle) { local_.push_back({due, std::move(handle)}); }
  void flush() {
    if (local_.empty()) return;
    const std::lock_guard<std::mutex> lock(mu_);
    if (incoming_.empty()) {
      incoming_.swap(local_);
    } else {
      for (Item& item : local_)
        incoming_.push_back(std::move(item));
      local_.clear();
    }
  }
  // Completes what it holds, then ends the thread.
  void stop() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    thread_.join();
  }

 private:
  struct Item {
    Clock::time_point due;
    Handle handle;
    bool operator>(const Item& o) const { return due > o.due; }
  };

  void loop() {
    std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
    std::vector<Item> batch;
    for (;;) {
      {
        const std::lock_guard<std::mutex> lock(mu_);
        batch.swap(incoming_);
      }
      for (Item& item : batch)
        heap.push(std::move(item));
      batch.clear();
      const auto now = Clock::now();
      while (!heap.empty() && heap.top().due <= now) {
        complete_(heap.top().handle);
        heap.pop();
      }
      if (stopping_.load() && heap.empty()) {
        const std::lock_guard<std::mutex> lock(mu_);
        if (incoming_.empty()) return;
      }
      // Naps of 0.5 to 1 ms: latencies are given in ms, and waking for every due time (up to
      // 100k times a second) would cost more CPU than either purgatory.
      auto until = now + std::chrono::milliseconds(1);
      if (!heap.empty()) {
        until = std::clamp(heap.top().due, now + std::chrono::microseconds(500), until);
      }
      std::this_thread::sleep_until(until);
    }
  }

  CompleteFn complete_;
  std::mutex mu_;
  std::vector<Item> incoming_;  // guarded by mu_
  std::vector<Item> local_;     // the generator's batch
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace purgatory_bench
