// HeapLazyCancel: a binary min-heap of (deadline, task*); cancel leaves a tombstone, skipped when
// popped (Java's DelayQueue/ScheduledThreadPoolExecutor). Tombstones are purged once they are a
// quarter of the heap, as Go's runtime timers do, so an add+cancel loop does not grow the heap
// without bound; the purge is timed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "timer_under_test.hpp"

namespace timer_bench {
namespace {

class HeapImpl {
 public:
  explicit HeapImpl(std::size_t n) : tasks_(n) { heap_.reserve(n); }
  void add(std::size_t i, Nanos delay) { add_at(i, now_ns() + delay.count()); }
  void add_at(std::size_t i, std::int64_t deadline) {
    Task& t = tasks_[i];
    if (t.scheduled) ++dead_;  // its old entry becomes a tombstone
    t.scheduled = true;
    ++t.generation;
    heap_.push_back(Entry{deadline, &t, t.generation});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  bool cancel(std::size_t i) {
    Task& t = tasks_[i];
    if (!t.scheduled) return false;
    t.scheduled = false;
    if (++dead_ > heap_.size() / 4) purge();
    return true;
  }
  void expire_due() {
    const std::int64_t now = now_ns();
    while (!heap_.empty() && heap_.front().deadline <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Entry e = heap_.back();
      heap_.pop_back();
      if (!live(e)) {
        --dead_;
        continue;
      }
      e.task->scheduled = false;
      e.task->payload();
    }
  }
  [[nodiscard]] std::uint64_t runs(std::size_t i) const { return tasks_[i].payload.runs; }
  template <class Body>
  void loop(benchmark::State& state, Body& body) {
    plain_loop(state, body);
  }

 private:
  struct Task {
    Payload payload;
    std::uint64_t generation = 0;  // bumped by each add: entries of older adds are tombstones
    bool scheduled = false;
  };
  struct Entry {
    std::int64_t deadline;
    Task* task;
    std::uint64_t generation;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const noexcept {
      return a.deadline > b.deadline;
    }
  };
  static bool live(const Entry& e) noexcept {
    return e.task->scheduled && e.task->generation == e.generation;
  }
  void purge() {
    std::erase_if(heap_, [](const Entry& e) { return !live(e); });
    std::make_heap(heap_.begin(), heap_.end(), Later{});
    dead_ = 0;
  }

  std::vector<Task> tasks_;
  std::vector<Entry> heap_;
  std::size_t dead_ = 0;  // tombstones in heap_
};

static_assert(TimerUnderTest<HeapImpl>);

}  // namespace
}  // namespace timer_bench
