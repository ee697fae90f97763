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
};

}  // namespace purgatory
