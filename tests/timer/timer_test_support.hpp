// Shared helpers for the timer suites: a counting task (the manual timer and the latch are in
// tests/support/manual_timer.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

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

}  // namespace purgatory::test
