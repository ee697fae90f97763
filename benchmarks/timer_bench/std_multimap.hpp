// StdMultimap: std::multimap<deadline, task*>; cancel erases through an iterator kept in the task.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "timer_under_test.hpp"

namespace timer_bench {
namespace {

class MultimapImpl {
 public:
  explicit MultimapImpl(std::size_t n) : tasks_(n) {}
  void add(std::size_t i, Nanos delay) { add_at(i, now_ns() + delay.count()); }
  void add_at(std::size_t i, std::int64_t deadline) {
    Task& t = tasks_[i];
    if (t.scheduled) queue_.erase(t.pos);
    t.pos = queue_.emplace(deadline, &t);
    t.scheduled = true;
  }
  bool cancel(std::size_t i) {
    Task& t = tasks_[i];
    if (!t.scheduled) return false;
    queue_.erase(t.pos);
    t.scheduled = false;
    return true;
  }
  void expire_due() {
    const std::int64_t now = now_ns();
    while (!queue_.empty() && queue_.begin()->first <= now) {
      Task* t = queue_.begin()->second;
      queue_.erase(queue_.begin());
      t->scheduled = false;
      t->payload();
    }
  }
  [[nodiscard]] std::uint64_t runs(std::size_t i) const { return tasks_[i].payload.runs; }
  template <class Body>
  void loop(benchmark::State& state, Body& body) {
    plain_loop(state, body);
  }

 private:
  struct Task;
  using Queue = std::multimap<std::int64_t, Task*>;
  struct Task {
    Payload payload;
    Queue::iterator pos;
    bool scheduled = false;
  };
  Queue queue_;
  std::vector<Task> tasks_;
};

static_assert(TimerUnderTest<MultimapImpl>);

}  // namespace
}  // namespace timer_bench
