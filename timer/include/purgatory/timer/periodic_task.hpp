/// @file
/// PeriodicTask: a task that runs again and again on a SystemTimer.
///
/// Two schedules:
///   - fixed rate: run k is due at first_deadline + k * period, whatever each run cost;
///   - fixed delay: each run is due `period` after the previous run *finished*.
/// Runs of one task never overlap: the next run is scheduled when the current one ends. That holds
/// for start() too: called during a run (from the run itself, or from another thread), it does not
/// schedule a run beside it; the run in progress schedules the new schedule's first run when it
/// ends (for the driver's next pass if that run's deadline has passed by then).
///
/// Missed runs (the process stalled, or the executor fell behind) follow one rule: the late run
/// happens once, as soon as possible, and the deadlines missed meanwhile are skipped; the next run
/// is due at the first deadline of the fixed-rate grid at or after the end of the late run (a run
/// that lasts exactly one period is followed by the next pass, on time). Nothing runs twice
/// to "catch up", and no run is ever early.
///
/// Each run adds the next one at its end. If the timer refuses that add (it is closing or
/// draining) the schedule ends quietly; if the add fails otherwise (std::bad_alloc: out of memory)
/// the schedule ends too, and the exception goes to the timer's TaskErrorHandler. The task is then
/// not pending, and start() begins a new schedule.
///
/// cancel() stops all future runs: a run whose turn comes after cancel() was called does not call
/// run_once() (each run checks, under the task's lock, that it was not cancelled before starting).
/// A run that had already started when cancel() was called finishes, and cancel() then returns
/// false. It is safe to cancel from inside the task's own run.
///
/// @code
///   auto beat = purgatory::make_periodic([] { send_heartbeat(); });
///   beat->start(timer, 0ms, 100ms, purgatory::PeriodicTask::Mode::fixed_rate);
///   ...
///   beat->cancel();
/// @endcode
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <utility>

#include "purgatory/timer/export.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory {

/// A task that runs again and again, at a fixed rate or with a fixed delay (see the overview).
/// Thread-safe: start() and cancel() may be called from any thread, including from the task's
/// own run. Subclasses implement run_once().
class PURGATORY_TIMER_EXPORT PeriodicTask : public TimerTask {
 public:
  /// The two schedules (see the file's overview).
  enum class Mode {
    fixed_rate,   ///< run k is due at the first deadline + k * period
    fixed_delay,  ///< each run is due `period` after the previous run finished
  };

  /// Schedules the first run `initial_delay` from now on `timer` (<= 0: at the driver's next pass,
  /// never inside start()), then one run every `period`. Starting a task that is already scheduled
  /// restarts it with the new schedule. During a run, the first run of the new schedule is
  /// scheduled when that run ends (see the top; is_pending() is false until then, and a timer
  /// refusing that add then ends the schedule, as for any later run).
  /// Throws std::invalid_argument, naming the value, for a period <= 0 or above
  /// SystemTimer::kMaxDelay, or an initial delay above kMaxDelay or whose deadline overflows the
  /// clock (the task is then left as it was); and what SystemTimer::add() throws.
  void start(SystemTimer& timer, Nanos initial_delay, Nanos period, Mode mode);

  /// Runs completed so far.
  [[nodiscard]] std::uint64_t run_count() const noexcept {
    return runs_.load(std::memory_order_acquire);
  }

 protected:
  /// The work of one run. An exception escaping it is reported by the timer; the schedule goes on.
  virtual void run_once() = 0;

 private:
  void run() final;
  void on_cancel() noexcept final;
  // The end of a run: adds the next one, or the first of a schedule start() asked for meanwhile.
  void schedule_next();
  // Adds the task for `deadline` (at once: with a delay of 0); a refusing timer ends the schedule.
  void add_next(SystemTimer& timer, Nanos deadline, bool at_once);
  void honour_cancel_during_add() noexcept;

  std::mutex mu_;                 // orders cancel() and start() against the runs
  bool stopped_ = true;           // guarded by mu_
  SystemTimer* owner_ = nullptr;  // guarded by mu_
  Nanos period_{0};               // guarded by mu_
  Mode mode_ = Mode::fixed_rate;  // guarded by mu_
  Nanos deadline_{0};             // deadline of the next run; guarded by mu_
  // A run is between its start and the end of run_once() (until schedule_next() takes over).
  bool running_ = false;  // guarded by mu_
  // start() came during that run: the run's end adds the new schedule's first run, at deadline_
  // (at once when restart_at_once_).
  bool restart_ = false;          // guarded by mu_
  bool restart_at_once_ = false;  // guarded by mu_
  std::atomic<std::uint64_t> runs_{0};
};

namespace detail {
// The PeriodicTask make_periodic() builds: each run calls `f`.
template <class F>
class CallablePeriodicTask final : public PeriodicTask {
 public:
  explicit CallablePeriodicTask(F f) : f_(std::move(f)) {}

 protected:
  void run_once() override { f_(); }

 private:
  F f_;
};
}  // namespace detail

/// make_periodic(callable): a PeriodicTask calling `f`; start() it on a timer.
template <TaskFunction F>
Ref<PeriodicTask> make_periodic(F&& f) {
  return Ref<PeriodicTask>(new detail::CallablePeriodicTask<std::decay_t<F>>(std::forward<F>(f)));
}

}  // namespace purgatory
