#include "purgatory/timer/periodic_task.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace purgatory {

void PeriodicTask::start(SystemTimer& timer, Nanos initial_delay, Nanos period, Mode mode) {
  if (period <= Nanos::zero()) {
    throw std::invalid_argument(
        fmt::format("PeriodicTask::start: period must be > 0 ns, got {} ns", period.count()));
  }
  std::unique_lock<std::mutex> lock(mu_);
  owner_ = &timer;
  period_ = period;
  mode_ = mode;
  stopped_ = false;
  deadline_ = timer.clock().now() + std::max(initial_delay, Nanos::zero());
  if (initial_delay > Nanos::zero()) {
    timer.add_at(TaskRef(this), deadline_);
    return;
  }
  // Due at once: an inline executor runs it on this thread, and run() takes mu_.
  lock.unlock();
  timer.add(TaskRef(this), Nanos::zero());
}

void PeriodicTask::run() {
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
  std::lock_guard<std::mutex> guard(mu_);
  if (stopped_) return;
  Nanos next = mode_ == Mode::fixed_delay ? finished + period_ : deadline_ + period_;
  if (mode_ == Mode::fixed_rate && next <= finished) {
    // Missed deadlines are skipped: jump to the first grid point after the late run ended.
    const auto missed = (finished - deadline_) / period_;
    next = deadline_ + (missed + 1) * period_;
  }
  deadline_ = next;
  try {
    owner_->add_at(TaskRef(this), next);  // next > finished: never runs inline from here
  } catch (const TimerRejected&) {
    stopped_ = true;  // the timer is closing or draining: the schedule ends
  }
}

void PeriodicTask::on_cancel() noexcept {
  std::lock_guard<std::mutex> guard(mu_);
  stopped_ = true;
}

}  // namespace purgatory
