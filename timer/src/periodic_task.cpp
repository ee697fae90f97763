#include "purgatory/timer/periodic_task.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "purgatory/timer/detail/race_point.hpp"

namespace purgatory {

void PeriodicTask::start(SystemTimer& timer, Nanos initial_delay, Nanos period, Mode mode) {
  if (period <= Nanos::zero()) {
    throw std::invalid_argument(
        fmt::format("PeriodicTask::start: period must be > 0 ns, got {} ns", period.count()));
  }
  // Every later run is re-added `period` after a deadline: a period add() would refuse must be
  // refused here, not by the re-add at the end of the first run (inside run(), where it could only
  // be reported).
  if (period > SystemTimer::kMaxDelay) {
    throw std::invalid_argument(
        fmt::format("PeriodicTask::start: period {} ns exceeds the maximum delay {} ns",
                    period.count(), SystemTimer::kMaxDelay.count()));
  }
  if (initial_delay > SystemTimer::kMaxDelay) {
    throw std::invalid_argument(
        fmt::format("PeriodicTask::start: initial delay {} ns exceeds the maximum delay {} ns",
                    initial_delay.count(), SystemTimer::kMaxDelay.count()));
  }
  Nanos first;
  {
    std::lock_guard<std::mutex> guard(mu_);
    const Nanos now = timer.clock().now();
    if (initial_delay > Nanos::zero() && now > Nanos::max() - initial_delay) {
      throw std::invalid_argument(
          fmt::format("PeriodicTask::start: initial delay {} ns from now ({} ns) overflows the "
                      "clock",
                      initial_delay.count(), now.count()));
    }
    owner_ = &timer;
    period_ = period;
    mode_ = mode;
    stopped_ = false;
    deadline_ = now + std::max(initial_delay, Nanos::zero());
    first = deadline_;
    if (running_) {
      // Runs never overlap: adding the task now would let the executor start the new schedule
      // beside the run in progress (inside it, on an inline executor). That run adds the new
      // schedule's first run when it ends.
      restart_ = true;
      restart_at_once_ = initial_delay <= Nanos::zero();
      return;
    }
  }
  // Never under mu_: the executor may run the task at once (an inline one, on this thread), and
  // run() takes mu_.
  PURGATORY_RACE_POINT("PeriodicTask::start: unlocked, before add");
  if (initial_delay > Nanos::zero()) {
    timer.add_at(TaskRef(this), first);
  } else {
    timer.add(TaskRef(this), Nanos::zero());
  }
  honour_cancel_during_add();
}

void PeriodicTask::run() {
  SystemTimer* not_due_on = nullptr;
  Nanos due{0};
  {
    // The start of a run. A cancel() that came after this run was scheduled (and found the task
    // idle between two runs, or between start() and its add) wins here: run_once() is not entered.
    std::lock_guard<std::mutex> guard(mu_);
    if (stopped_) return;
    // The schedule in force decides, not whichever add() put the task in the timer: adds from a
    // start() and from the end of a run can race, and the one the timer kept may be stale.
    // Another run in progress will add the next run when it ends: this one is dropped.
    if (running_) return;
    // Not due yet under the schedule in force (a start() moved the deadline later after this
    // run's add): no run is ever early, so wait for that deadline instead.
    if (owner_->clock().now() < deadline_) {
      not_due_on = owner_;
      due = deadline_;
    } else {
      running_ = true;
    }
  }
  if (not_due_on != nullptr) {
    PURGATORY_RACE_POINT("PeriodicTask::run: not due yet, unlocked, before re-add");
    add_next(*not_due_on, due, /*at_once=*/false);
    return;
  }
  PURGATORY_RACE_POINT("PeriodicTask::run: started, before run_once");
  try {
    run_once();
  } catch (...) {
    runs_.fetch_add(1, std::memory_order_acq_rel);
    schedule_next();
    throw;  // reported by the timer's error handler
  }
  runs_.fetch_add(1, std::memory_order_acq_rel);
  schedule_next();
}

void PeriodicTask::schedule_next() {
  SystemTimer* timer = nullptr;
  Nanos next;
  bool at_once = false;
  {
    std::lock_guard<std::mutex> guard(mu_);
    running_ = false;  // from here on, a start() adds the task itself
    if (stopped_) {
      restart_ = false;
      return;
    }
    if (restart_) {
      // start() was called during the run: its schedule begins now that the run is over.
      restart_ = false;
      next = deadline_;
      at_once = restart_at_once_;
    } else {
      const Nanos finished = owner_->clock().now();
      next = mode_ == Mode::fixed_delay ? finished + period_ : deadline_ + period_;
      if (mode_ == Mode::fixed_rate && next < finished) {
        // Missed deadlines are skipped: the next run is the first grid point at or after the
        // end of the late run. One equal to the finish time is not missed: it is due now.
        const auto periods = (finished - deadline_ + period_ - Nanos{1}) / period_;  // rounded up
        next = deadline_ + periods * period_;
      }
      deadline_ = next;
    }
    timer = owner_;
  }
  // Outside mu_, as in start(): if another thread moved the clock past `next` meanwhile, the
  // executor may run the task right here (that run checks stopped_ first).
  PURGATORY_RACE_POINT("PeriodicTask::schedule_next: unlocked, before add_at");
  add_next(*timer, next, at_once);
}

void PeriodicTask::add_next(SystemTimer& timer, Nanos deadline, bool at_once) {
  try {
    if (at_once) {
      timer.add(TaskRef(this), Nanos::zero());
    } else {
      timer.add_at(TaskRef(this), deadline);
    }
  } catch (const TimerRejected&) {
    std::lock_guard<std::mutex> guard(mu_);
    stopped_ = true;  // the timer is closing or draining: the schedule ends
    return;
  }
  honour_cancel_during_add();
}

void PeriodicTask::honour_cancel_during_add() noexcept {
  // A cancel() between our check of stopped_ and the add found nothing pending to stop: the add
  // must not outlive it. cancel() again now that the task is scheduled.
  bool stopped = false;
  {
    std::lock_guard<std::mutex> guard(mu_);
    stopped = stopped_;
  }
  if (stopped) (void)cancel();
}

void PeriodicTask::on_cancel() noexcept {
  std::lock_guard<std::mutex> guard(mu_);
  stopped_ = true;
}

}  // namespace purgatory
