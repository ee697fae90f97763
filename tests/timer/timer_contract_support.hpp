// Helpers for the timer contract suite: executors a test can see into, thread names, a watchdog
// for tests whose failure would be a deadlock, and an allocation counter.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__) || defined(__APPLE__)
#include <pthread.h>
#endif

#include "contract_support.hpp"
#include "manual_timer.hpp"
#include "platform/thread_name.hpp"
#include "purgatory/timer/executor.hpp"
#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "timer_test_support.hpp"

#include "allocation_counter.hpp"
#include "sanitizers.hpp"

namespace purgatory::contract {

// Keeps every batch it is given; the test runs (or drops) them when it wants: the window
// "expired, not yet started" held open as long as needed. Thread-safe.
class StashExecutor final : public Executor {
 public:
  void execute(ExpiredBatch& batch) override {
    const std::lock_guard<std::mutex> lock(mu_);
    sizes_.push_back(batch.size());
    batches_.push_back(std::move(batch));
    batch = ExpiredBatch();
  }
  // Runs every batch held, in the order given, on the calling thread.
  void run_all() {
    for (;;) {
      ExpiredBatch batch;
      {
        const std::lock_guard<std::mutex> lock(mu_);
        if (batches_.empty()) return;
        batch = std::move(batches_.front());
        batches_.pop_front();
      }
      batch.run_all();
    }
  }
  // Destroys every batch held without running it.
  void drop_all() {
    std::deque<ExpiredBatch> dropped;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      dropped.swap(batches_);
    }
  }
  [[nodiscard]] std::size_t held() {
    const std::lock_guard<std::mutex> lock(mu_);
    return batches_.size();
  }
  // Sizes of every batch given so far.
  [[nodiscard]] std::vector<std::size_t> sizes() {
    const std::lock_guard<std::mutex> lock(mu_);
    return sizes_;
  }
  [[nodiscard]] int shutdowns() const { return shutdowns_.load(); }
  void shutdown() override { shutdowns_.fetch_add(1); }

 private:
  std::mutex mu_;
  std::deque<ExpiredBatch> batches_;  // guarded by mu_
  std::vector<std::size_t> sizes_;    // guarded by mu_
  std::atomic<int> shutdowns_{0};
};

// `threads` workers sharing one FIFO queue: batches may run concurrently, as on any thread pool.
class PoolExecutor final : public Executor {
 public:
  // Tasks run on the workers: a timer handing them here is thread-safe in every run (DrivenTimer).
  static constexpr bool kRunsTasksElsewhere = true;
  explicit PoolExecutor(int threads) {
    for (int i = 0; i < threads; ++i)
      workers_.emplace_back([this] { work(); });
  }
  ~PoolExecutor() override { shutdown(); }
  PoolExecutor(const PoolExecutor&) = delete;
  PoolExecutor& operator=(const PoolExecutor&) = delete;

  void execute(ExpiredBatch& batch) override {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_) {
        queue_.push_back(std::move(batch));
        batch = ExpiredBatch();
      }
    }
    if (!batch.empty()) {
      batch.run_all();  // stopped: nothing may be lost
      return;
    }
    cv_.notify_one();
  }
  void shutdown() override {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      ExpiredBatch batch = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      batch.run_all();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ExpiredBatch> queue_;  // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::vector<std::thread> workers_;
};

// The two sides of the claim that starts an expired task's run (ExpiredBatch::run_all): at the
// point before it a cancel() or a reschedule() still withdraws the run; after it, the run goes
// ahead.
struct ClaimSide {
  const char* point;
  bool before_claim;
};
inline constexpr std::array<ClaimSide, 2> kClaimSides{
    {{"ExpiredBatch::run_all: before the claim", true},
     {"ExpiredBatch::run_all: claimed, before run", false}}};

// The calling thread's name (Linux keeps 15 characters), as the system reports it. Read here on
// POSIX rather than through the timer's platform layer, which libpurgatory_timer.so does not
// export.
inline std::string thread_name() {
#if defined(__linux__) || defined(__APPLE__)
  char buf[64] = {};
  (void)::pthread_getname_np(::pthread_self(), buf, sizeof(buf));
  return buf;
#else
  return platform::this_thread_name();
#endif
}

// The names of this process's threads (Linux keeps 15 characters), read from /proc: Linux only,
// nullopt elsewhere (the tests that count threads by name then say so and skip that check).
inline std::optional<std::multiset<std::string>> process_thread_names() {
#if defined(__linux__)
  std::multiset<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.insert(name);
  }
  return names;
#else
  return std::nullopt;
#endif
}

// Aborts the process, naming the test, if not disarmed within `limit`: a test whose failure mode
// is a deadlock fails in seconds instead of at CTest's timeout.
class Watchdog {
 public:
  explicit Watchdog(const char* what, std::chrono::seconds limit = std::chrono::seconds(60))
      : thread_([this, what, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: '%s' still blocked after %lld s (deadlock?)\n", what,
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace purgatory::contract

// Helpers shared by a header's contract tests and its race tests.
namespace purgatory::test {

// A timer on a manual clock with the executor given, in the run's mode unless `concurrency` names
// one.
struct Timed {
  explicit Timed(std::shared_ptr<purgatory::Executor> executor,
                 purgatory::TaskErrorHandler on_error = {},
                 std::optional<TimerOptions::Concurrency> concurrency = {})
      : timer(driven_by_hand(clock, std::move(executor),
                             {.name = "exec", .on_task_error = std::move(on_error)}, concurrency)) {
  }
  void advance(Nanos by) {
    clock.advance(by);
    driver.advance_clock();
  }
  ManualClock clock;
  SystemTimer timer;
  ExternalDriver driver{timer};
};

// Counts runs in progress and the most ever seen at once.
struct Overlap {
  std::atomic<int> in_run{0};
  std::atomic<int> most{0};
  void enter() {
    const int now = in_run.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
  }
  void leave() { in_run.fetch_sub(1); }
};

}  // namespace purgatory::test
