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
  Nanos first;
  {
    std::lock_guard<std::mutex> guard(mu_);
    owner_ = &timer;
    period_ = period;
    mode_ = mode;
    stopped_ = false;
    deadline_ = timer.clock().now() + std::max(initial_delay, Nanos::zero());
    first = deadline_;
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
  {
    // The start of a run. A cancel() that came after this run was scheduled (and found the task
    // idle between two runs, or between start() and its add) wins here: run_once() is not entered.
    std::lock_guard<std::mutex> guard(mu_);
    if (stopped_) return;
  }
  PURGATORY_RACE_POINT("PeriodicTask::run: started, before run_once");
  try {
    run_once();
  } catch (...) {
    runs_.fetch_add(1, std::memory_order_acq_rel);
    schedule_next(owner_->clock().now());
    throw;  // reported by the timer's error handler
  }
  runs_.fetch_add(1, std::memory_order_acq_rel);
  schedule_next(owner_->clock().now());
}

void PeriodicTask::schedule_next(Nanos finished) {
  SystemTimer* timer = nullptr;
  Nanos next;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (stopped_) return;
    next = mode_ == Mode::fixed_delay ? finished + period_ : deadline_ + period_;
    // A deadline equal to the finish time is not missed: it is due now.
    if (mode_ == Mode::fixed_rate && next < finished) {
      // Missed deadlines are skipped: jump to the first grid point after the late run ended.
      const auto missed = (finished - deadline_) / period_;
      next = deadline_ + (missed + 1) * period_;
    }
    deadline_ = next;
    timer = owner_;
  }
  // Outside mu_, as in start(): if another thread moved the clock past `next` meanwhile, the
  // executor may run the task right here (that run checks stopped_ first).
  PURGATORY_RACE_POINT("PeriodicTask::schedule_next: unlocked, before add_at");
  try {
    timer->add_at(TaskRef(this), next);
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
