// Shared helpers for the timer suites: a counting task, and one that tells when it is destroyed
// (the manual timer and the latch are in tests/support/manual_timer.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "manual_timer.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory::test {

using namespace std::chrono_literals;

// A task that counts its runs and calls an optional hook.
struct CountingTask : TimerTask {
  explicit CountingTask(std::function<void()> hook = {}) : hook_(std::move(hook)) {}
  std::atomic<int> runs{0};

 protected:
  void run() override {
    runs.fetch_add(1, std::memory_order_relaxed);
    if (hook_) hook_();
  }

 private:
  std::function<void()> hook_;
};

// A counting task that sets `destroyed` when its last reference is released.
struct Tracked : CountingTask {
  explicit Tracked(std::atomic<bool>& destroyed, std::function<void()> hook = {})
      : CountingTask(std::move(hook)), destroyed_(destroyed) {}
  ~Tracked() override { destroyed_ = true; }

 private:
  std::atomic<bool>& destroyed_;
};

// `n` fresh counting tasks.
inline std::vector<TaskRef> make_counting_tasks(int n) {
  std::vector<TaskRef> tasks;
  for (int i = 0; i < n; ++i)
    tasks.push_back(make_task<CountingTask>());
  return tasks;
}

// Advances `m` in 1 ms steps until its clock reads `until`, expiring at each step.
inline void advance_to(ManualTimer& m, Nanos until) {
  while (m.clock.now() < until)
    m.advance(std::chrono::milliseconds(1));
}

}  // namespace purgatory::test
