/// @file
/// TimerOptions: how a SystemTimer is built.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/executor.hpp"

namespace purgatory {

/// How a SystemTimer is built. A plain value; the defaults are Kafka's (1 ms x 20 buckets, a
/// reaper thread and an executor thread). AsioTimer sets `executor` and `driver` itself.
struct TimerOptions {
  /// Who advances the clock.
  enum class Driver {
    reaper_thread,  ///< the timer owns a thread that sleeps until the next bucket (Kafka's reaper)
    external,       ///< no thread: an ExternalDriver (your loop) or an AsioTimer advances it
  };
  /// Which threads may call the timer.
  enum class Concurrency {
    thread_safe,    ///< any member from any thread, a task's run() included (the default)
    single_thread,  ///< one thread makes every call: no lock, no atomic read-modify-write
  };

  std::string name = "timer";  ///< names the threads ("reaper-<name>") and error reports
  /// Width of a bucket of the finest level, in (0, 1 day]: a task runs within one tick of its
  /// deadline (executor delay aside), never before it.
  Nanos tick = std::chrono::milliseconds(1);
  int wheel_size = 20;                    ///< buckets per level, in [2, 65536]
  const Clock* clock = nullptr;           ///< null: SteadyClock::instance(); must outlive the timer
  std::shared_ptr<Executor> executor{};   ///< null: a ThreadExecutor owned by the timer
  Driver driver = Driver::reaper_thread;  ///< who advances the clock
  std::size_t max_pending = 0;            ///< 0: unlimited; else add() past it throws TimerRejected
  TaskErrorHandler on_task_error{};       ///< where exceptions escaping run() go; null: stderr
  /// Timer bases, each its own wheel and lock; a thread adds to base (its slot % bases), so adds
  /// from different threads do not meet on one lock. Rounded up to a power of two, at most 1024.
  /// 0: one per hardware thread, at most 64.
  std::size_t bases = 0;
  /// single_thread: the timer belongs to one thread, the first to add, cancel, reschedule or drive
  /// it, and add(), add_at(), reschedule(), cancel() and the expiry then take no lock and no
  /// atomic read-modify-write of a task's state (as an event loop's own timer heap does; what is
  /// left is one atomic decrement per run, the timer dropping its reference once the task is idle
  /// again, when its other Refs may be anywhere). That thread makes every call on the timer, on
  /// the tasks pending in it (cancel()) and on their Refs (copying one, dropping one) while they
  /// are pending or queued, and runs the expired tasks: needs Driver::external and an executor
  /// that runs them where it is called (InlineExecutor; AsioTimer's, on an io_context made with
  /// concurrency hint 1). A purgatory on such a timer inherits the rule (its watch() adds a
  /// timeout, a completion cancels one). One base (`bases` is not used). close() and the
  /// destructor may run on another thread once the owner has stopped using the timer. Without
  /// NDEBUG a call from another thread aborts, naming the timer and the call; with NDEBUG it is a
  /// data race.
  Concurrency concurrency = Concurrency::thread_safe;
};

}  // namespace purgatory
