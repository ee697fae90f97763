#include "purgatory/timer/system_timer.hpp"

#include "purgatory/timer/periodic_task.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "purgatory/timer/detail/race_point.hpp"

namespace purgatory {
namespace {

constexpr std::int64_t kNobodySleeps = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kUnknownNow = std::numeric_limits<std::int64_t>::min();

Nanos checked_tick(Nanos tick) {
  if (tick <= Nanos::zero() || tick > std::chrono::hours(24)) {
    throw std::invalid_argument(
        fmt::format("SystemTimer: tick must be in (0, 1 day], got {} ns", tick.count()));
  }
  return tick;
}

std::shared_ptr<const TaskErrorHandler> make_error_handler(TaskErrorHandler handler,
                                                           const std::string& name) {
  if (!handler) {
    handler = [name](const TimerTask&, std::exception_ptr error) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      fmt::print(stderr, "purgatory: timer '{}': a task threw: {}\n", name, what);
    };
  }
  return std::make_shared<const TaskErrorHandler>(std::move(handler));
}

// The state a task takes when handed to an executor: the next sequence number, phase queued.
constexpr std::uint32_t next_ticket(std::uint32_t state, std::uint32_t queued) noexcept {
  return ((state & ~3U) + 4U) | queued;
}

}  // namespace

// ---- TimerTask ---------------------------------------------------------------------------------

bool TimerTask::cancel() noexcept {
  on_cancel();
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    const std::uint32_t s = state_of(w);
    switch (phase_of(s)) {
      case kIdle:
        return false;
      case kQueued:
        // Expired but not started: withdrawing it races only with the job's own claim (a CAS).
        // The job keeps its reference and drops it when it finds the run withdrawn.
        if (word_.compare_exchange_weak(w, make_word(with_phase(s, kIdle), refs_of(w)),
                                        std::memory_order_acq_rel)) {
          return true;
        }
        break;
      default:  // kScheduled: only the owning timer, under its lock, may unlink it.
        PURGATORY_RACE_POINT("TimerTask::cancel: saw it scheduled, before the timer's lock");
        if (timer_.load(std::memory_order_acquire)->cancel_scheduled(*this)) return true;
        w = word_.load(std::memory_order_acquire);
        break;
    }
  }
}

// ---- SystemTimer -------------------------------------------------------------------------------

SystemTimer::SystemTimer(TimerOptions options)
    : name_(std::move(options.name)),
      clock_(options.clock != nullptr ? options.clock : &SteadyClock::instance()),
      tick_(checked_tick(options.tick)),
      max_pending_(options.max_pending),
      executor_(std::move(options.executor)),
      on_error_(make_error_handler(std::move(options.on_task_error), name_)),
      wheel_(tick_.count(), options.wheel_size, clock_->now().count()) {
  owns_executor_ = executor_ == nullptr;
  if (owns_executor_) executor_ = std::make_shared<ThreadExecutor>("exec-" + name_);
  clock_->add_waiter(this);
  if (options.driver == TimerOptions::Driver::reaper_thread) {
    reaper_ = std::thread([this] { reaper_loop(); });
    std::string thread_name = "reaper-" + name_;
    thread_name.resize(std::min<std::size_t>(thread_name.size(), 15));
    pthread_setname_np(reaper_.native_handle(), thread_name.c_str());
  }
}

SystemTimer::~SystemTimer() {
  close();
  clock_->remove_waiter(this);
}

std::int64_t SystemTimer::expiration_for(std::int64_t now, std::int64_t delay) const {
  if (delay > kMaxDelay.count()) {
    throw std::invalid_argument(
        fmt::format("SystemTimer '{}': delay {} ns exceeds the maximum {} ns", name_, delay,
                    kMaxDelay.count()));
  }
  if (delay <= 0) return -1;
  const std::int64_t tick = tick_.count();
  if (now > std::numeric_limits<std::int64_t>::max() - delay - tick) {
    throw std::invalid_argument(
        fmt::format("SystemTimer '{}': deadline now + {} ns overflows the clock (now = {} ns)",
                    name_, delay, now));
  }
  // Round up to the tick: the wheel fires a bucket at its start, so this is what makes a task
  // never run before its deadline.
  return (now + delay + tick - 1) / tick * tick;
}

void SystemTimer::add_task(TimerTask& task, Nanos delay) {
  const std::int64_t now = clock_->now().count();
  schedule(task, now, expiration_for(now, delay.count()), /*only_if_pending=*/false);
}

void SystemTimer::add_task_at(TimerTask& task, Nanos deadline) {
  // No clock read: the deadline is absolute. One already passed is due at once; one the wheel's
  // clock has not reached yet goes to its bucket, which the next expiry pass takes (at once when
  // a driver sleeps: it is earlier than what the driver waits for, so add wakes it).
  const std::int64_t tick = tick_.count();
  if (deadline.count() > std::numeric_limits<std::int64_t>::max() - tick) {
    throw std::invalid_argument(fmt::format("SystemTimer '{}': deadline {} ns overflows the clock",
                                            name_, deadline.count()));
  }
  const std::int64_t expiration =
      deadline.count() <= 0 ? -1 : (deadline.count() + tick - 1) / tick * tick;
  schedule(task, kUnknownNow, expiration, /*only_if_pending=*/false, deadline.count());
}

bool SystemTimer::reschedule(TimerTask& task, Nanos delay) {
  const std::int64_t now = clock_->now().count();
  return schedule(task, now, expiration_for(now, delay.count()), /*only_if_pending=*/true);
}

bool SystemTimer::schedule(TimerTask& t, std::int64_t now, std::int64_t expiration,
                           bool only_if_pending, std::int64_t deadline) {
  ExpiredBatch run_now;
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (closed_ || draining_) {
      // While drain() runs (its last expired tasks included) the reason stays `draining`.
      throw TimerRejected(
          draining_ ? TimerRejected::Reason::draining : TimerRejected::Reason::closed,
          fmt::format("SystemTimer '{}': no new tasks accepted after {}", name_,
                      draining_ ? "drain() started" : "close()"));
    }
    // Checked before any state changes. The wheel's clock is never ahead of the real one but may
    // lag it (it moves only when something expires), so a deadline that looks too far from it is
    // judged again against the clock itself before being refused.
    if (now == kUnknownNow && expiration - wheel_.current_time() > kMaxDelay.count() &&
        deadline - clock_->now().count() > kMaxDelay.count()) {
      throw std::invalid_argument(
          fmt::format("SystemTimer '{}': deadline {} ns is more than the maximum delay ({} ns) "
                      "after now",
                      name_, deadline, kMaxDelay.count()));
    }
    std::uint64_t w = t.word_.load(std::memory_order_acquire);
    std::uint32_t s = TimerTask::state_of(w);
    if (TimerTask::phase_of(s) != TimerTask::kIdle &&
        t.timer_.load(std::memory_order_relaxed) != this) {
      throw std::invalid_argument(
          fmt::format("SystemTimer '{}': the task is pending in another timer", name_));
    }
    if (only_if_pending && TimerTask::phase_of(s) == TimerTask::kIdle) return false;
    if (pending_ == 0) {  // empty wheel: catch up with the clock, for free
      wheel_.advance_clock(now != kUnknownNow ? now : clock_->now().count());
    }
    // max_pending bounds the tasks held by the wheel: one due at once never enters it.
    const bool enters_wheel =
        expiration >= 0 && expiration >= wheel_.current_time() + tick_.count();
    if (enters_wheel && TimerTask::phase_of(s) != TimerTask::kScheduled && max_pending_ != 0 &&
        pending_ >= max_pending_) {
      throw TimerRejected(TimerRejected::Reason::pending_limit,
                          fmt::format("SystemTimer '{}': {} tasks pending, the limit (max_pending)",
                                      name_, pending_));
    }
    // Publish the owner before any phase that makes cancel() look at it (kScheduled): a cancel()
    // on another thread that sees the new phase must find this timer, never a stale or null one.
    t.timer_.store(this, std::memory_order_release);
    // Take the task out of wherever it is. A scheduled task keeps the wheel's reference; any
    // other becomes scheduled and gains it in the same atomic step.
    for (;;) {
      const std::uint32_t phase = TimerTask::phase_of(s);
      if (phase == TimerTask::kScheduled) {  // stable: only mu_ holders change it
        TimingWheel::remove(t);
        --pending_;
        break;
      }
      if (phase == TimerTask::kIdle && only_if_pending) return false;  // its run just started
      PURGATORY_RACE_POINT("SystemTimer::schedule: state read, before taking the task");
      // Idle, or queued (withdraw that run: its job keeps its own reference and will skip).
      // The CAS makes us the owner against a concurrent cancel(), a job's claim, or another timer.
      if (t.word_.compare_exchange_weak(
              w,
              TimerTask::make_word(TimerTask::with_phase(s, TimerTask::kScheduled),
                                   TimerTask::refs_of(w) + 1),
              std::memory_order_acq_rel)) {
        break;
      }
      s = TimerTask::state_of(w);
    }
    if (pending_ == 0) {  // empty wheel: catch up with the clock, for free
      wheel_.advance_clock(now != kUnknownNow ? now : clock_->now().count());
    }
    if (expiration >= 0 && wheel_.add(t, expiration)) {
      ++pending_;
      wake = expiration < armed_;
    } else {
      queue_expired(t, run_now);
    }
  }
  PURGATORY_RACE_POINT("SystemTimer::schedule: unlocked, before execute or wake");
  if (!run_now.empty()) executor_->execute(run_now);
  if (wake) {
    cv_.notify_all();
    if (wakeup_hook_) wakeup_hook_();
  }
  return true;
}

void SystemTimer::queue_expired(TimerTask& task, ExpiredBatch& batch) noexcept {
  // Scheduled, so the state is ours (mu_); only the count may move under us. The wheel's
  // reference passes to the job.
  const std::uint32_t s = task.state();
  const std::uint32_t ticket = next_ticket(s, TimerTask::kQueued);
  task.word_.fetch_add(TimerTask::state_delta(s, ticket), std::memory_order_acq_rel);
  if (batch.jobs_.empty()) {
    batch.jobs_.reserve(kMaxBatch);
    batch.on_error_ = on_error_;
  }
  batch.jobs_.push_back(ExpiredBatch::Job{TaskRef(&task, /*add_ref=*/false), ticket});
}

bool SystemTimer::cancel_scheduled(TimerTask& task) noexcept {
  std::uint64_t before = 0;
  {
    std::lock_guard<std::mutex> guard(mu_);
    const std::uint32_t s = task.state();
    if (TimerTask::phase_of(s) != TimerTask::kScheduled ||
        task.timer_.load(std::memory_order_relaxed) != this) {
      return false;
    }
    TimingWheel::remove(task);
    --pending_;
    // Idle, and the wheel's reference dropped, in one step.
    before = task.word_.fetch_sub(
        TimerTask::state_delta(TimerTask::with_phase(s, TimerTask::kIdle), s) + TimerTask::kOneRef,
        std::memory_order_acq_rel);
  }
  if (TimerTask::refs_of(before) == 1) delete &task;  // that was the last reference
  return true;
}

bool SystemTimer::advance_clock(Nanos max_wait) {
  return advance(max_wait, false);
}

bool SystemTimer::advance(Nanos max_wait, bool stop_when_drained) {
  std::unique_lock<std::mutex> lock(mu_);
  std::int64_t now = clock_->now().count();
  const std::int64_t until = max_wait <= Nanos::zero()            ? now
                             : max_wait.count() >= kForever - now ? kForever
                                                                  : now + max_wait.count();
  for (;;) {
    const auto next = wheel_.next_expiration();
    if (next && *next <= now) break;
    if (closed_ || now >= until || (stop_when_drained && pending_ == 0)) return false;
    const std::int64_t target = std::min(next.value_or(kForever), until);
    armed_ = sleepers_ == 0 ? target : std::min(armed_, target);
    ++sleepers_;
    clock_->wait_until(lock, cv_, target == kForever ? Nanos::max() : Nanos{target});
    if (--sleepers_ == 0) armed_ = kNobodySleeps;
    ++wakeups_;
    now = clock_->now().count();
  }
  // Expire in batches, never holding the lock while the executor (and so user code) runs.
  ExpiredBatch batch;
  for (;;) {
    const bool done = expire_due(now, batch);
    lock.unlock();
    PURGATORY_RACE_POINT("SystemTimer::advance: batch expired, unlocked, before execute");
    if (!batch.empty()) executor_->execute(batch);
    if (done) return true;
    lock.lock();
  }
}

bool SystemTimer::expire_due(std::int64_t now, ExpiredBatch& batch) {
  const bool done = wheel_.expire_due(now, [&](TimerTask& t) {
    if (wheel_.add(t, TimingWheel::expiration_of(t))) return true;  // cascaded to a finer level
    --pending_;
    queue_expired(t, batch);
    return batch.size() < kMaxBatch;
  });
  if (draining_ && pending_ == 0) cv_.notify_all();  // a drain() may be waiting for this
  return done;
}

void SystemTimer::reaper_loop() {
  while (advance_clock(Nanos::max()) || !is_closed()) {
  }
}

std::size_t SystemTimer::size() const {
  std::lock_guard<std::mutex> guard(mu_);
  return pending_;
}

std::vector<std::size_t> SystemTimer::size_per_level() const {
  std::lock_guard<std::mutex> guard(mu_);
  std::vector<std::size_t> sizes;
  for (const TimingWheel* w = &wheel_; w != nullptr; w = w->overflow_wheel()) {
    sizes.push_back(w->level_size());
  }
  return sizes;
}

std::size_t SystemTimer::wheel_memory_bytes() const {
  std::lock_guard<std::mutex> guard(mu_);
  return wheel_.memory_bytes();
}

std::optional<Nanos> SystemTimer::next_expiration() const {
  std::lock_guard<std::mutex> guard(mu_);
  const auto next = wheel_.next_expiration();
  if (!next) return std::nullopt;
  return Nanos{*next};
}

std::optional<Nanos> SystemTimer::arm() {
  std::lock_guard<std::mutex> guard(mu_);
  const auto next = wheel_.next_expiration();
  armed_ = next.value_or(kForever);
  if (!next) return std::nullopt;
  return Nanos{*next};
}

void SystemTimer::set_wakeup_hook(std::function<void()> hook) {
  wakeup_hook_ = std::move(hook);
}

std::vector<TaskRef> SystemTimer::drain(Nanos max_wait) {
  std::vector<boost::intrusive_ptr<PeriodicTask>> periodic;
  std::int64_t until = kForever;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (closed_) return {};
    draining_ = true;
    const std::int64_t now = clock_->now().count();
    if (max_wait < Nanos::max() && max_wait.count() < kForever - now) {
      until = now + std::max<std::int64_t>(max_wait.count(), 0);
    }
    wheel_.for_each_task([&](TimerTask& t) {
      if (auto* p = dynamic_cast<PeriodicTask*>(&t)) periodic.emplace_back(p);
    });
  }
  // Outside the lock: cancel() takes the periodic task's own lock, then ours.
  for (const auto& p : periodic)
    p->cancel();
  for (;;) {
    const std::int64_t now = clock_->now().count();
    if (now >= until || !advance(Nanos{until - now}, /*stop_when_drained=*/true)) {
      std::lock_guard<std::mutex> guard(mu_);
      if (pending_ == 0 || closed_ || clock_->now().count() >= until) break;
    }
  }
  std::vector<TaskRef> handed_back = close();  // adds from the last tasks still say `draining`
  {
    std::lock_guard<std::mutex> guard(mu_);
    draining_ = false;
  }
  return handed_back;
}

std::vector<TaskRef> SystemTimer::close() {
  std::vector<TaskRef> handed_back;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (closed_) return handed_back;
    closed_ = true;
    handed_back.reserve(pending_);
    wheel_.drain([&](TimerTask& t) {
      const std::uint32_t s = t.state();
      t.word_.fetch_add(TimerTask::state_delta(s, TimerTask::with_phase(s, TimerTask::kIdle)),
                        std::memory_order_acq_rel);
      handed_back.emplace_back(&t, /*add_ref=*/false);  // adopt the wheel's reference
    });
    pending_ = 0;
  }
  PURGATORY_RACE_POINT("SystemTimer::close: closed, unlocked, before joining the reaper");
  cv_.notify_all();
  if (wakeup_hook_)
    wakeup_hook_();  // an external driver re-arms: nothing left, so it stops waiting
  if (reaper_.joinable()) reaper_.join();
  if (owns_executor_) executor_->shutdown();  // runs what already expired, then joins
  return handed_back;
}

bool SystemTimer::is_closed() const {
  std::lock_guard<std::mutex> guard(mu_);
  return closed_;
}

std::uint64_t SystemTimer::wakeups() const {
  std::lock_guard<std::mutex> guard(mu_);
  return wakeups_;
}

void SystemTimer::on_clock_advanced() noexcept {
  { std::lock_guard<std::mutex> guard(mu_); }  // a waiter is either before its check or asleep
  cv_.notify_all();
}

}  // namespace purgatory
