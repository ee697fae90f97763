/// @file
/// Where expired tasks run: an Executor receives them in batches (one call per batch of up to
/// SystemTimer::kMaxBatch due tasks, so the hand-off costs little). The library brings
/// ThreadExecutor (a dedicated thread, the default), InlineExecutor (the thread that advances the
/// clock) and AsioExecutor (purgatory/timer/asio.hpp). ExpiredBatch and Executor::execute() are
/// what you implement against to bring your own (a pool, an event loop).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "purgatory/timer/export.hpp"
#include "purgatory/timer/ref.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory {

/// Receives the exceptions that escape TimerTask::run() (and Executor::execute(), see
/// SystemTimer). Thread-safe (called from executors).
using TaskErrorHandler = std::function<void(const TimerTask& task, std::exception_ptr error)>;

namespace detail {
struct BatchContext;  // the timer's side of its batches: error handler, batches in flight
}

/// Expired tasks, ready to run. Move-only. run_all() runs each task unless its run was withdrawn
/// meanwhile (cancel(), or the task re-added to a new deadline): that decision and the start of
/// the run are one atomic step, so a run and a successful cancel() never both happen.
/// Destroying a batch without running it drops those runs: the tasks are neither run nor
/// cancelled, and stay pending until cancel() (which then returns true) or a new add().
/// Executors must not do that except when the process shuts down.
/// A batch counts as in flight at its timer from the moment its first task expires until run_all()
/// returns or the batch is destroyed: SystemTimer::drain() waits for that.
/// Thread-compatible: one thread runs a batch.
class PURGATORY_TIMER_EXPORT ExpiredBatch {
 public:
  /// An empty batch.
  ExpiredBatch() = default;
  /// Moves another batch's runs into a new batch.
  ExpiredBatch(ExpiredBatch&& other) noexcept;
  /// Replaces this batch's runs with another's; runs it held are dropped, as by its destruction.
  ExpiredBatch& operator=(ExpiredBatch&& other) noexcept;
  /// Drops the runs it still holds (see above); the batch no longer counts as in flight.
  ~ExpiredBatch();

  /// Runs the tasks on the calling thread, then empties the batch (its memory is kept for reuse).
  /// Order: a task whose deadline falls in an earlier tick runs before one of a later tick; tasks
  /// due in the same tick run in no particular order. Never throws: an exception from a task goes
  /// to the timer's TaskErrorHandler.
  void run_all() noexcept;

  /// Runs held (each a task due, unless withdrawn since).
  [[nodiscard]] std::size_t size() const noexcept { return jobs_.size(); }
  /// Whether the batch holds no run.
  [[nodiscard]] bool empty() const noexcept { return jobs_.empty(); }

 private:
  friend class SystemTimer;
  struct Job {
    TaskRef task;
    std::uint32_t ticket;  // the task's state when this run was issued
  };
  // Moves the task from `ticket` to idle, the start of its run; false if the run was withdrawn.
  // `single_thread`: the caller is the only thread touching the task's state (a single-thread
  // timer's owner), so a store does it, not a compare-and-swap.
  static bool claim(TimerTask& task, std::uint32_t ticket, bool single_thread) noexcept;
  // No longer in flight (run, or dropped): tells a drain() waiting for the last one.
  void land() noexcept;
  std::vector<Job> jobs_;
  std::shared_ptr<detail::BatchContext> context_;
  bool in_flight_ = false;  // counted in context_'s batches in flight
};

/// An executor for expired tasks. Implementations are thread-safe.
class PURGATORY_TIMER_EXPORT Executor {
 public:
  virtual ~Executor() = default;
  /// Arranges for batch.run_all() to be called once: now, or later after moving the batch out.
  /// Called without any timer lock held. Should not throw: if it does, having left the batch, the
  /// exception goes to the timer's TaskErrorHandler (with the batch's first task) and the batch
  /// runs at once on the calling thread (none of its tasks is lost); having taken the batch, the
  /// exception is printed to stderr (naming the timer) and the batch is the executor's.
  virtual void execute(ExpiredBatch& batch) = 0;
  /// Called once by SystemTimer::close() on the executor the timer created itself: runs what is
  /// already queued, then releases resources. Batches given after that run on the caller's thread.
  virtual void shutdown() {}
};

/// Runs batches on the thread that advances the clock: the reaper thread, or the caller of
/// advance_clock() (drain() included). Lowest latency; a slow task delays the others' expiry. A
/// task added when already due runs at the next advance, never inside the add() that added it, so
/// a task that re-adds itself keeps the stack flat. Thread-safe (stateless).
class PURGATORY_TIMER_EXPORT InlineExecutor final : public Executor {
 public:
  void execute(ExpiredBatch& batch) override { batch.run_all(); }
};

/// One worker thread with a FIFO queue. Thread-safe.
class PURGATORY_TIMER_EXPORT ThreadExecutor final : public Executor {
 public:
  /// `name` becomes the thread's name (truncated to the 15 characters Linux keeps).
  explicit ThreadExecutor(std::string name = "timer-exec");
  ~ThreadExecutor() override;
  ThreadExecutor(const ThreadExecutor&) = delete;
  ThreadExecutor& operator=(const ThreadExecutor&) = delete;

  void execute(ExpiredBatch& batch) override;
  /// Runs every queued batch, then joins the thread. Idempotent. Must not be called from the
  /// worker.
  void shutdown() override;

 private:
  void work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ExpiredBatch> queue_;  // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::thread worker_;
};

}  // namespace purgatory
