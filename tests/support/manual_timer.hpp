// The tests' timer on a manual clock, and their latch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>

#include "purgatory/timer/system_timer.hpp"

namespace purgatory::test {

// A timer driven by hand: nothing moves until advance() is called, and tasks run inline on the
// thread that calls it, so a test sees every effect as soon as advance() returns. `timer` is the
// timer; `shared` owns it, for a purgatory or a future that shares it.
struct ManualTimer {
  explicit ManualTimer(Nanos tick = std::chrono::milliseconds(1), int wheel_size = 20,
                       std::size_t max_pending = 0, std::size_t bases = 0)
      : shared(std::make_shared<SystemTimer>(options(clock, tick, wheel_size, max_pending, bases))),
        timer(*shared) {}
  ManualTimer(const ManualTimer&) = delete;
  ManualTimer& operator=(const ManualTimer&) = delete;

  // The options of such a timer on `c`, for tests that build their own.
  static TimerOptions options(const ManualClock& c, Nanos tick = std::chrono::milliseconds(1),
                              int wheel_size = 20, std::size_t max_pending = 0,
                              std::size_t bases = 0) {
    return TimerOptions{.name = "manual",
                        .tick = tick,
                        .wheel_size = wheel_size,
                        .clock = &c,
                        .executor = std::make_shared<InlineExecutor>(),
                        .driver = TimerOptions::Driver::external,
                        .max_pending = max_pending,
                        .on_task_error = {},
                        .bases = bases};
  }

  // Moves the clock, then drives the timer as its reaper thread would: expiry passes until one
  // finds nothing due (a task a run adds when already due is taken by the next pass, never by
  // the add() itself). advance(0ms) runs what is due now.
  void advance(Nanos by) {
    clock.advance(by);
    while (timer.advance_clock(Nanos::zero())) {
    }
  }

  ManualClock clock;
  std::shared_ptr<SystemTimer> shared;
  SystemTimer& timer;
};

// Counts down to zero from any thread (one count by default: a one-shot event). wait() gives up
// after `timeout` and returns false, so a test whose choreography broke fails instead of hanging.
class Latch {
 public:
  explicit Latch(int count = 1) : count_(count) {}
  void count_down() {
    const std::lock_guard<std::mutex> lock(mu_);
    if (--count_ <= 0) cv_.notify_all();
  }
  void set() {  // the count reaches zero at once
    const std::lock_guard<std::mutex> lock(mu_);
    count_ = 0;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return count_ <= 0; });
  }
  bool wait_for(std::chrono::milliseconds timeout) { return wait(timeout); }
  bool is_set() {
    const std::lock_guard<std::mutex> lock(mu_);
    return count_ <= 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

}  // namespace purgatory::test
