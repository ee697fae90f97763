// Where expired tasks run.
//
// The timer hands each expired task to an Executor as an ExpiredTask, a move-only job that runs
// the task once. Three executors come with the library:
//   - ThreadExecutor: one dedicated thread (Kafka's "executor-<name>"), the default;
//   - InlineExecutor: on the thread that advances the clock (lowest latency; a slow task delays
//     the expiry of the others);
//   - AsioExecutor (purgatory/timer/asio.hpp): posted to any Asio executor.
// Any other executor (a thread pool, an event loop) implements execute().
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

#include "purgatory/timer/timer_task.hpp"

namespace purgatory {

// Receives the exceptions that escape TimerTask::run(). Thread-safe (called from executors).
using TaskErrorHandler = std::function<void(const TimerTask& task, std::exception_ptr error)>;

// One expired task, ready to run. Move-only. Invoking it runs the task unless the run was
// withdrawn meanwhile (cancel(), or the task re-added to a new deadline): that decision and the
// start of the run are one atomic step, so a run and a successful cancel() never both happen.
// Destroying it without invoking it drops the run (the task is then neither run nor cancelled:
// executors must not do that except when the process shuts down).
class ExpiredTask {
 public:
  ExpiredTask(ExpiredTask&&) noexcept = default;
  ExpiredTask& operator=(ExpiredTask&&) noexcept = default;
  ~ExpiredTask() = default;

  // Runs the task on the calling thread, at most once. Never throws: an exception from the task
  // goes to the timer's TaskErrorHandler.
  void operator()() noexcept;

  [[nodiscard]] const TimerTask& task() const noexcept { return *task_; }

 private:
  friend class SystemTimer;
  ExpiredTask(TaskRef task, std::uint32_t ticket,
              std::shared_ptr<const TaskErrorHandler> on_error) noexcept
      : task_(std::move(task)), ticket_(ticket), on_error_(std::move(on_error)) {}

  TaskRef task_;
  std::uint32_t ticket_;  // the task's state when this run was issued
  std::shared_ptr<const TaskErrorHandler> on_error_;
};

// An executor for expired tasks. Implementations are thread-safe.
class Executor {
 public:
  virtual ~Executor() = default;
  // Takes every job of `batch` (leaving it empty) and arranges for each to be invoked once.
  // Called without any timer lock held.
  virtual void execute(std::vector<ExpiredTask>& batch) = 0;
  // Called once by SystemTimer::close(): runs what is already queued, then releases resources.
  // Jobs given after that are run on the caller's thread.
  virtual void shutdown() {}
};

// Runs jobs on the calling thread. Thread-safe (stateless).
class InlineExecutor final : public Executor {
 public:
  void execute(std::vector<ExpiredTask>& batch) override;
};

// One worker thread with a FIFO queue. Thread-safe.
class ThreadExecutor final : public Executor {
 public:
  // `name` becomes the thread's name (truncated to the 15 characters Linux keeps).
  explicit ThreadExecutor(std::string name = "timer-exec");
  ~ThreadExecutor() override;
  ThreadExecutor(const ThreadExecutor&) = delete;
  ThreadExecutor& operator=(const ThreadExecutor&) = delete;

  void execute(std::vector<ExpiredTask>& batch) override;
  // Runs every queued job, then joins the thread. Idempotent. Must not be called from the worker.
  void shutdown() override;

 private:
  void work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ExpiredTask> queue_;  // guarded by mu_
  bool stopping_ = false;          // guarded by mu_
  std::thread worker_;
};

}  // namespace purgatory
