// Shared helpers for the timer suites: a timer on a manual clock, a counting task, a latch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "purgatory/timer/system_timer.hpp"

namespace purgatory::test {

using namespace std::chrono_literals;

// A timer driven by hand: nothing moves until advance() is called, and tasks run inline, so a
// test sees every effect as soon as advance() returns.
struct ManualTimer {
  explicit ManualTimer(Nanos tick = 1ms, int wheel_size = 20, std::size_t max_pending = 0,
                       std::size_t bases = 0)
      : timer(TimerOptions{.name = "manual",
                           .tick = tick,
                           .wheel_size = wheel_size,
                           .clock = &clock,
                           .executor = std::make_shared<InlineExecutor>(),
                           .driver = TimerOptions::Driver::external,
                           .max_pending = max_pending,
                           .on_task_error = {},
                           .bases = bases}) {}

  // Moves the clock and expires everything due.
  void advance(Nanos by) {
    clock.advance(by);
    timer.advance_clock(Nanos::zero());
  }

  ManualClock clock;
  SystemTimer timer;
};

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

// Counts down to zero; wait_for() returns whether it got there in time.
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void count_down() {
    std::lock_guard<std::mutex> guard(mu_);
    if (--count_ <= 0) cv_.notify_all();
  }
  bool wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return count_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

}  // namespace purgatory::test
