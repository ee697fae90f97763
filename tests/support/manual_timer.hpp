// The tests' timer on a manual clock, and their latch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "test_run_mode.hpp"

namespace purgatory::test {

// The mode of a timer a test drives by hand: `asked` if the test names one (a test that calls the
// timer from several threads asks for thread_safe), else the run's (test_run_mode.hpp).
inline TimerOptions::Concurrency hand_driven_concurrency(
    std::optional<TimerOptions::Concurrency> asked = std::nullopt) noexcept {
  if (asked) return *asked;
  return single_thread_run() ? TimerOptions::Concurrency::single_thread
                             : TimerOptions::Concurrency::thread_safe;
}

// `options` for a timer on `clock` that hands expired tasks to `executor` and is driven by the
// test (an ExternalDriver): nothing expires until its advance_clock() is called. In the run's mode
// unless `concurrency` names one.
inline TimerOptions driven_by_hand(const Clock& clock, std::shared_ptr<Executor> executor,
                                   TimerOptions options = {},
                                   std::optional<TimerOptions::Concurrency> concurrency = {}) {
  options.clock = &clock;
  options.executor = std::move(executor);
  options.driver = TimerOptions::Driver::external;
  options.concurrency = hand_driven_concurrency(concurrency);
  return options;
}

// A timer driven by hand: nothing moves until advance() is called, and tasks run inline on the
// thread that calls it, so a test sees every effect as soon as advance() returns. `timer` is the
// timer, `driver` drives it; `shared` owns it, for a purgatory or a future that shares it.
struct ManualTimer {
  explicit ManualTimer(Nanos tick = std::chrono::milliseconds(1), int wheel_size = 20,
                       std::size_t max_pending = 0, std::size_t bases = 0,
                       std::optional<TimerOptions::Concurrency> concurrency = {})
      : shared(std::make_shared<SystemTimer>(
            options(clock, tick, wheel_size, max_pending, bases, concurrency))),
        timer(*shared),
        driver(timer) {}
  // Defaults but the mode: ManualTimer(TimerOptions::Concurrency::thread_safe) for a test that
  // calls the timer from several threads.
  explicit ManualTimer(TimerOptions::Concurrency concurrency)
      : ManualTimer(std::chrono::milliseconds(1), 20, 0, 0, concurrency) {}
  ManualTimer(const ManualTimer&) = delete;
  ManualTimer& operator=(const ManualTimer&) = delete;

  // The options of such a timer on `c`, for tests that build their own.
  static TimerOptions options(const ManualClock& c, Nanos tick = std::chrono::milliseconds(1),
                              int wheel_size = 20, std::size_t max_pending = 0,
                              std::size_t bases = 0,
                              std::optional<TimerOptions::Concurrency> concurrency = {}) {
    return driven_by_hand(c, std::make_shared<InlineExecutor>(),
                          TimerOptions{.name = "manual",
                                       .tick = tick,
                                       .wheel_size = wheel_size,
                                       .max_pending = max_pending,
                                       .on_task_error = {},
                                       .bases = bases},
                          concurrency);
  }

  // Moves the clock, then drives the timer as its reaper thread would: expiry passes until one
  // finds nothing due (a task a run adds when already due is taken by the next pass, never by
  // the add() itself). advance(0ms) runs what is due now.
  void advance(Nanos by) {
    clock.advance(by);
    while (driver.advance_clock()) {
    }
  }

  ManualClock clock;
  std::shared_ptr<SystemTimer> shared;
  SystemTimer& timer;
  ExternalDriver driver;
};

// A timer on a manual clock of its own that hands expired tasks to an E made of `executor_args`
// (a pool, an executor that holds them...), driven by the test: step() moves the clock and makes
// one expiry pass. Unlike ManualTimer::advance(), nothing waits for the executor to run them.
// Thread-safe in every run when E runs tasks on threads of its own (declares kRunsTasksElsewhere),
// else in the run's mode.
template <class E>
struct DrivenTimer {
  template <class... Args>
  explicit DrivenTimer(TimerOptions options = {}, Args&&... executor_args)
      : executor(std::make_shared<E>(std::forward<Args>(executor_args)...)),
        timer(driven_by_hand(clock, executor, std::move(options), own_mode())),
        driver(timer) {}
  DrivenTimer(const DrivenTimer&) = delete;
  DrivenTimer& operator=(const DrivenTimer&) = delete;

  // Moves the clock by `by`, then one expiry pass: what advance_clock() returns.
  bool step(Nanos by) {
    clock.advance(by);
    return driver.advance_clock();
  }

  static std::optional<TimerOptions::Concurrency> own_mode() noexcept {
    if constexpr (requires { E::kRunsTasksElsewhere; }) {
      return TimerOptions::Concurrency::thread_safe;
    } else {
      return std::nullopt;
    }
  }

  ManualClock clock;
  std::shared_ptr<E> executor;
  SystemTimer timer;
  ExternalDriver driver;
};

// Drives a DrivenTimer from a thread of its own until stop() (or destruction): step(1 ms), then a
// sleep of `pause` if it is not zero, again and again.
class DriverThread {
 public:
  template <class E>
  explicit DriverThread(DrivenTimer<E>& m, std::chrono::microseconds pause = {})
      : thread_([this, &m, pause] {
          while (!stop_.load()) {
            m.step(std::chrono::milliseconds(1));
            if (pause > std::chrono::microseconds::zero()) std::this_thread::sleep_for(pause);
          }
        }) {}
  ~DriverThread() { stop(); }
  DriverThread(const DriverThread&) = delete;
  DriverThread& operator=(const DriverThread&) = delete;

  // Returns once the thread has ended; no step is made after.
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
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
