// SystemTimer (system_timer.hpp): construction, and the add path: add(), add_at(),
// reschedule() and the timer's side of cancel(), with what the wheels report of themselves.
// The drivers and expiry passes are in system_timer_expiry.cpp, drain() and close() in
// system_timer_shutdown.cpp; system_timer_internal.hpp says which lock guards what.
#include "purgatory/timer/system_timer.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "batch_context.hpp"
#include "platform/thread_name.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "system_timer_internal.hpp"
#include "thread_slot.hpp"
#include "timer_base.hpp"

namespace purgatory {
namespace {

using detail::kNobody;
using detail::kUnknownNow;
using detail::what_of;

constexpr std::size_t kMaxBases = 1024;

Nanos checked_tick(Nanos tick) {
  if (tick <= Nanos::zero() || tick > std::chrono::hours(24)) {
    throw std::invalid_argument(
        fmt::format("SystemTimer: tick must be in (0, 1 day], got {} ns", tick.count()));
  }
  return tick;
}

std::size_t checked_bases(std::size_t bases) {
  if (bases > kMaxBases) {
    throw std::invalid_argument(
        fmt::format("SystemTimer: bases must be at most {}, got {}", kMaxBases, bases));
  }
  if (bases == 0) {
    const std::size_t hw = std::max(1U, std::thread::hardware_concurrency());
    bases = std::min<std::size_t>(hw, 64);
  }
  return std::bit_ceil(bases);
}

TaskErrorHandler make_error_handler(TaskErrorHandler handler, const std::string& name) {
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
  return handler;
}

// The state a task takes when handed to an executor: the next sequence number, phase queued.
constexpr std::uint32_t next_ticket(std::uint32_t state, std::uint32_t queued) noexcept {
  return ((state & ~3U) + 4U) | queued;
}

}  // namespace

SystemTimer::SystemTimer(TimerOptions options)
    : name_(std::move(options.name)),
      clock_(options.clock != nullptr ? options.clock : &SteadyClock::instance()),
      tick_(checked_tick(options.tick)),
      max_pending_(options.max_pending),
      executor_(std::move(options.executor)),
      batches_(std::make_shared<detail::BatchContext>(
          make_error_handler(std::move(options.on_task_error), name_),
          options.concurrency == TimerOptions::Concurrency::single_thread)),
      armed_(kNobody),
      external_until_(kNobody),
      external_(options.driver == TimerOptions::Driver::external),
      wheel_size_(options.wheel_size),
      single_thread_(options.concurrency == TimerOptions::Concurrency::single_thread) {
  if (single_thread_ && options.driver != TimerOptions::Driver::external) {
    throw std::invalid_argument(fmt::format(
        "SystemTimer '{}': Concurrency::single_thread needs Driver::external (the reaper is a "
        "second thread)",
        name_));
  }
  if (single_thread_ && executor_ == nullptr) {
    throw std::invalid_argument(fmt::format(
        "SystemTimer '{}': Concurrency::single_thread needs an executor that runs tasks on the "
        "timer's thread (InlineExecutor), not the default ThreadExecutor",
        name_));
  }
  const std::size_t bases = single_thread_ ? 1 : checked_bases(options.bases);
  const std::int64_t start = clock_->now().count();
  bases_.reserve(bases);
  for (std::size_t i = 0; i < bases; ++i) {
    // The first base checks wheel_size (detail::TimingWheel throws, naming it) before any thread
    // starts.
    bases_.push_back(std::make_unique<detail::TimerBase>(*this, tick_.count(), options.wheel_size,
                                                         start, single_thread_));
  }
  base_mask_ = bases - 1;
  owns_executor_ = executor_ == nullptr;
  if (owns_executor_) executor_ = std::make_shared<ThreadExecutor>("exec-" + name_);
  clock_->add_waiter(&clock_hook_);
  if (options.driver == TimerOptions::Driver::reaper_thread) {
    try {
      reaper_ = platform::start_named_thread("reaper-" + name_, [this] { reaper_loop(); });
    } catch (...) {
      clock_->remove_waiter(&clock_hook_);  // not constructed: the clock must not call us back
      throw;
    }
  }
}

SystemTimer::~SystemTimer() {
  (void)close();
  clock_->remove_waiter(&clock_hook_);
}

void SystemTimer::check_thread([[maybe_unused]] const char* call) const noexcept {
#ifndef NDEBUG
  if (!single_thread_) return;
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id owner{};
  if (owner_.compare_exchange_strong(owner, me, std::memory_order_relaxed) || owner == me) return;
  fmt::print(stderr,
             "purgatory: SystemTimer '{}' is Concurrency::single_thread, and {} was called from "
             "a thread other than the one that owns it\n",
             name_, call);
  std::abort();
#endif
}

detail::TimerBase& SystemTimer::my_base() const noexcept {
  if (base_mask_ == 0) return *bases_.front();  // one base (a single_thread timer's): no lookup
  return *bases_[detail::timer_thread_slot() & base_mask_];
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

std::int64_t SystemTimer::with_slack(std::int64_t expiration, Nanos slack) const {
  if (slack < Nanos::zero()) {
    throw std::invalid_argument(fmt::format(
        "SystemTimer '{}': slack must not be negative, got {} ns", name_, slack.count()));
  }
  // Half the slack is the rounding's, half is left to run the bucket: a bucket of grain g holds
  // deadlines spread over g, and an executor that keeps up (busy a fraction u < 1 of the time)
  // runs them in u x g. So with g <= slack / 2 a task waits less than g for its bucket and less
  // than g behind the bucket's others: within its slack.
  const std::int64_t half = slack.count() / 2;
  if (expiration < 0 || half < tick_.count() * wheel_size_) return expiration;
  // The coarsest level tick (tick x wheel_size^k) not above half the slack: rounded up to it, the
  // expiration is the start of a bucket of that level, where the wheel leaves it (settled) until
  // it runs.
  std::int64_t grain = tick_.count();
  const std::int64_t limit = half / wheel_size_;  // grain x wheel_size <= half
  while (grain <= limit)
    grain *= wheel_size_;
  if (expiration > std::numeric_limits<std::int64_t>::max() - grain) return expiration;
  return (expiration + grain - 1) / grain * grain;
}

void SystemTimer::add_task(TimerTask& task, Nanos delay) {
  const std::int64_t now = clock_->now().count();
  schedule(task, now, expiration_for(now, delay.count()), /*only_if_pending=*/false);
}

void SystemTimer::add_task(TimerTask& task, Nanos delay, Nanos slack) {
  const std::int64_t now = clock_->now().count();
  schedule(task, now, with_slack(expiration_for(now, delay.count()), slack),
           /*only_if_pending=*/false);
}

std::int64_t SystemTimer::expiration_at(Nanos deadline) const {
  // No clock read: the deadline is absolute. One already passed is due at once; one the wheel's
  // clock has not reached yet goes to its bucket, which the next expiry pass takes (at once when
  // a driver sleeps: it is earlier than what the driver waits for, so add wakes it).
  const std::int64_t tick = tick_.count();
  if (deadline.count() > std::numeric_limits<std::int64_t>::max() - tick) {
    throw std::invalid_argument(fmt::format("SystemTimer '{}': deadline {} ns overflows the clock",
                                            name_, deadline.count()));
  }
  return deadline.count() <= 0 ? -1 : (deadline.count() + tick - 1) / tick * tick;
}

void SystemTimer::add_task_at(TimerTask& task, Nanos deadline) {
  schedule(task, kUnknownNow, expiration_at(deadline), /*only_if_pending=*/false, deadline.count());
}

void SystemTimer::add_task_at(TimerTask& task, Nanos deadline, Nanos slack) {
  schedule(task, kUnknownNow, with_slack(expiration_at(deadline), slack),
           /*only_if_pending=*/false, deadline.count());
}

bool SystemTimer::reschedule(TimerTask& task, Nanos delay) {
  const std::int64_t now = clock_->now().count();
  return schedule(task, now, expiration_for(now, delay.count()), /*only_if_pending=*/true);
}

// schedule() serves add(), add_at() and reschedule(). It locks the base the task goes to (the one
// holding it when it is scheduled in this timer, else the calling thread's) and acts on the phase
// of the task's state word read under that lock. Every way out of its loop is a row here:
//
//   read under the base's lock                 what schedule() does
//   -----------------------------------------  ------------------------------------------------
//   the timer closed or draining               throws TimerRejected; nothing changed
//   add_at(): deadline > kMaxDelay from now     throws std::invalid_argument; nothing changed
//   not idle, last held by another timer       throws std::invalid_argument; nothing changed
//   scheduled, its base not stored yet         looks again (another add() is storing it)
//   scheduled in another base of this timer    looks again (it moved since the base was chosen)
//   idle, and this is reschedule()             returns false: nothing pending, nothing done
//   idle or queued, max_pending reached        throws TimerRejected; nothing changed
//   scheduled here (a bucket or the due list)  [move] unlinks it; it keeps the timer's reference
//                                              and its unit of max_pending
//   idle or queued                             [claim] one CAS to scheduled gaining the timer's
//                                              reference (a queued run is withdrawn: its job
//                                              finds its ticket gone), then stores the base in
//                                              place_; a lost CAS looks again (reschedule():
//                                              returns false if the task went idle, its run begun)
//
// Then [place]: into the wheel when the expiration is at least a tick after the wheel's time,
// else into the base's due list, which the driver's next pass takes first: schedule() never runs
// a task, nor hands one to the executor. Every scheduled task, in the wheel or due, holds a unit
// of max_pending, taken before anything changes and given back when it leaves the timer, so
// size() never exceeds the limit. What may allocate (a wheel level never used before) is
// allocated before anything changes too, so out of memory the call changes nothing.
bool SystemTimer::schedule(TimerTask& t, std::int64_t now, std::int64_t expiration,
                           bool only_if_pending, std::int64_t deadline) {
  check_thread(only_if_pending ? "reschedule()" : "add()");
  bool wake = false;
  for (;;) {
    detail::TimerBase* const base = base_for(t);
    if (base == nullptr) continue;  // its base being stored: base_for() yielded
    const std::lock_guard<detail::BaseLock> lock(base->mu);
    check_accepting(now, expiration, deadline, *base);
    std::uint64_t w = t.word_.load(std::memory_order_acquire);
    const std::uint32_t phase = TimerTask::phase_of(TimerTask::state_of(w));
    detail::TimerBase* const held = phase == TimerTask::kScheduled ? t.holding_base() : nullptr;
    if (phase == TimerTask::kScheduled && held == nullptr) continue;  // its base being stored
    if (phase != TimerTask::kIdle && !owns(t.last_base())) {
      throw std::invalid_argument(
          fmt::format("SystemTimer '{}': the task is pending in another timer", name_));
    }
    if (phase == TimerTask::kScheduled && held != base) continue;  // it moved: look again
    if (only_if_pending && phase == TimerTask::kIdle) return false;

    if (base->pending == 0) catch_up(base->wheel, now);
    const bool enters_wheel =
        expiration >= 0 && expiration >= base->wheel.current_time() + tick_.count();
    if (enters_wheel) base->wheel.reserve_levels(expiration);
    if (phase == TimerTask::kScheduled) {
      unlink_scheduled(t, *base);  // [move]
    } else {
      take_unit();  // throws at max_pending, before anything changed
      const Claim claimed = claim(t, *base, w, only_if_pending);
      if (claimed != Claim::won) {
        give_back_unit();
        if (claimed == Claim::run_started) return false;
        continue;
      }
    }
    wake = place(t, *base, expiration, enters_wheel);
    break;
  }
  PURGATORY_RACE_POINT("SystemTimer::schedule: unlocked, before execute or wake");
  if (wake) wake_drivers();
  return true;
}

bool SystemTimer::owns(const detail::TimerBase* b) const noexcept {
  return b != nullptr && b->owner == this;
}

detail::TimerBase* SystemTimer::base_for(const TimerTask& t) const noexcept {
  if (TimerTask::phase_of(t.state()) != TimerTask::kScheduled) return &my_base();
  detail::TimerBase* const held = t.holding_base();
  if (held == nullptr) {
    // Another add() took it a few instructions ago and is storing its base: look again.
    PURGATORY_RACE_POINT("SystemTimer::schedule: scheduled, its base not stored yet");
    std::this_thread::yield();
    return nullptr;
  }
  return owns(held) ? held : &my_base();
}

void SystemTimer::check_accepting(std::int64_t now, std::int64_t expiration, std::int64_t deadline,
                                  const detail::TimerBase& base) const {
  if (closed_.load(std::memory_order_relaxed) || draining_.load(std::memory_order_relaxed)) {
    // While drain() runs (its last expired tasks included) the reason stays `draining`.
    const bool draining = draining_.load(std::memory_order_relaxed);
    throw TimerRejected(draining ? TimerRejected::Reason::draining : TimerRejected::Reason::closed,
                        fmt::format("SystemTimer '{}': no new tasks accepted after {}", name_,
                                    draining ? "drain() started" : "close()"));
  }
  // The wheel's time is never ahead of the clock but may lag it (it moves only when something
  // expires), so a deadline that looks too far from it is judged again against the clock.
  if (now == kUnknownNow && expiration - base.wheel.current_time() > kMaxDelay.count() &&
      deadline - clock_->now().count() > kMaxDelay.count()) {
    throw std::invalid_argument(
        fmt::format("SystemTimer '{}': deadline {} ns is more than the maximum delay ({} ns) "
                    "after now",
                    name_, deadline, kMaxDelay.count()));
  }
}

void SystemTimer::catch_up(detail::TimingWheel& wheel, std::int64_t now) const noexcept {
  // An empty wheel's time is free to move: to the clock, so that a new task is placed from now.
  wheel.advance_clock(now != kUnknownNow ? now : clock_->now().count());
}

void SystemTimer::take_unit() {
  if (max_pending_ == 0) return;
  if (limited_pending_.fetch_add(1, std::memory_order_relaxed) >= max_pending_) {
    limited_pending_.fetch_sub(1, std::memory_order_relaxed);
    throw TimerRejected(TimerRejected::Reason::pending_limit,
                        fmt::format("SystemTimer '{}': {} tasks pending, the limit (max_pending)",
                                    name_, max_pending_));
  }
}

void SystemTimer::give_back_unit() noexcept {
  if (max_pending_ != 0) limited_pending_.fetch_sub(1, std::memory_order_relaxed);
}

void SystemTimer::unlink_scheduled(TimerTask& t, detail::TimerBase& base) const noexcept {
  if (t.bucket() == &base.due) {
    base.due.remove(t);
    return;
  }
  detail::TimingWheel::remove(t);
  if (--base.pending == 0) catch_up(base.wheel, kUnknownNow);  // alone: as an add to an empty wheel
}

SystemTimer::Claim SystemTimer::claim(TimerTask& t, detail::TimerBase& base, std::uint64_t w,
                                      bool only_if_pending) noexcept {
  for (;;) {
    const std::uint32_t s = TimerTask::state_of(w);
    const std::uint32_t phase = TimerTask::phase_of(s);
    if (phase == TimerTask::kScheduled) return Claim::lost;
    if (only_if_pending && phase == TimerTask::kIdle) return Claim::run_started;
    PURGATORY_RACE_POINT("SystemTimer::schedule: state read, before taking the task");
    const std::uint64_t taken = TimerTask::make_word(
        TimerTask::with_phase(s, TimerTask::kScheduled), TimerTask::refs_of(w) + 1);
    if (single_thread_) {  // nobody else touches the word: a store, not a CAS
      t.word_.store(taken, std::memory_order_relaxed);
      break;
    }
    if (t.word_.compare_exchange_weak(w, taken, std::memory_order_acq_rel)) break;
  }
  PURGATORY_RACE_POINT("SystemTimer::schedule: taken, before storing its base");
  // Scheduled, its place marked retired: a cancel() or add() meanwhile yields until this store
  // (one store, not a second read-modify-write of word_ through a linking phase).
  t.place_.store(reinterpret_cast<std::uintptr_t>(&base) | TimerTask::kBaseTag,
                 std::memory_order_release);
  return Claim::won;
}

bool SystemTimer::place(TimerTask& t, detail::TimerBase& base, std::int64_t expiration,
                        bool enters_wheel) noexcept {
  if (enters_wheel && base.wheel.add(t, expiration)) {
    ++base.pending;
    return expiration < armed_.load();
  }
  // Due already (or by the wheel's time once caught up): the next pass takes it. A task re-adding
  // itself from its own run() so goes round the driver's loop, never nesting.
  if (base.due.empty()) base.due_since = base.wheel.current_time();  // <= every due deadline
  base.due.add(t);
  return base.due.size() == 1;
}

void SystemTimer::prepare_batch(ExpiredBatch& batch, std::size_t tasks) const {
  if (batch.jobs_.capacity() < tasks) batch.jobs_.reserve(tasks);
  if (!batch.context_) batch.context_ = batches_;
}

void SystemTimer::queue_expired(TimerTask& task, ExpiredBatch& batch) noexcept {
  assert(batch.jobs_.size() < batch.jobs_.capacity() && batch.context_ != nullptr);
  if (!batch.in_flight_) {
    // In flight from the moment its first task leaves the wheel (under the base's lock, so a
    // drain() that finds the wheel empty afterwards also finds the batch counted).
    batch.in_flight_ = true;
    batches_->in_flight.fetch_add(1, std::memory_order_relaxed);
  }
  // Scheduled, so the state is ours (its base's lock); only the count may move under us. The
  // wheel's reference passes to the job.
  const std::uint32_t s = task.state();
  const std::uint32_t ticket = next_ticket(s, TimerTask::kQueued);
  retire_base(task);
  if (single_thread_) {
    task.word_.store(task.word_.load(std::memory_order_relaxed) + TimerTask::state_delta(s, ticket),
                     std::memory_order_relaxed);
  } else {
    task.word_.fetch_add(TimerTask::state_delta(s, ticket), std::memory_order_acq_rel);
  }
  batch.jobs_.push_back(ExpiredBatch::Job{TaskRef(&task, /*add_ref=*/false), ticket});
}

void SystemTimer::hand_off(ExpiredBatch& batch) noexcept {
  try {
    executor_->execute(batch);
    return;
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    if (batch.empty()) {  // the executor took the batch, then threw: its tasks are its own
      std::fprintf(stderr, "purgatory: timer '%s': Executor::execute() threw: %s\n", name_.c_str(),
                   what_of(error));
      return;
    }
    try {
      const TaskErrorHandler& report = batches_->on_error;
      if (report) report(*batch.jobs_.front().task, error);
    } catch (...) {
      std::fputs("purgatory: the task error handler threw; error dropped\n", stderr);
    }
  }
  batch.run_all();  // not taken: nothing may be lost, so it runs here
}

bool SystemTimer::cancel_scheduled(TimerTask& task, detail::TimerBase& base,
                                   std::uintptr_t place) noexcept {
  check_thread("cancel()");
  std::uint64_t before = 0;
  bool emptied = false;
  {
    std::lock_guard<detail::BaseLock> guard(base.mu);
    const std::uint32_t s = task.state();
    // Still scheduled where it was seen (a bucket of `base`), or it moved: look again.
    if (TimerTask::phase_of(s) != TimerTask::kScheduled ||
        task.place_.load(std::memory_order_relaxed) != place) {
      return false;
    }
    if (task.bucket() == &base.due) {
      base.due.remove(task);  // due, not yet taken by a pass
    } else {
      detail::TimingWheel::remove(task);
      --base.pending;
    }
    give_back_unit();
    emptied = base.pending == 0 && base.due.empty();
    retire_base(task);
    // Idle, and the wheel's reference dropped, in one step.
    const std::uint64_t delta =
        TimerTask::state_delta(TimerTask::with_phase(s, TimerTask::kIdle), s) + TimerTask::kOneRef;
    if (single_thread_) {
      before = task.word_.load(std::memory_order_relaxed);
      task.word_.store(before - delta, std::memory_order_relaxed);
    } else {
      before = task.word_.fetch_sub(delta, std::memory_order_acq_rel);
    }
  }
  if (TimerTask::refs_of(before) == 1) delete &task;  // that was the last reference
  // An external driver (AsioTimer) looks again, so that no wait stays armed for a deadline that
  // is gone. The reaper thread needs no call: it wakes once at that deadline and finds nothing.
  if (emptied) call_wakeup_hook();
  return true;
}

std::size_t SystemTimer::total_pending() const {
  std::size_t n = 0;
  for (const auto& b : bases_) {
    const std::lock_guard<detail::BaseLock> guard(b->mu);
    n += b->pending + b->due.size();
  }
  return n;
}

std::size_t SystemTimer::size() const {
  check_thread("size()");
  return total_pending();
}

std::vector<std::size_t> SystemTimer::size_per_level() const {
  std::vector<std::size_t> sizes;
  for (const auto& b : bases_) {
    const std::lock_guard<detail::BaseLock> guard(b->mu);
    std::size_t level = 0;
    for (const detail::TimingWheel* w = &b->wheel; w != nullptr; w = w->overflow_wheel(), ++level) {
      if (sizes.size() <= level) sizes.resize(level + 1, 0);
      sizes[level] += w->level_size();
    }
  }
  return sizes;
}

std::size_t SystemTimer::wheel_memory_bytes() const {
  std::size_t n = 0;
  for (const auto& b : bases_) {
    const std::lock_guard<detail::BaseLock> guard(b->mu);
    n += b->wheel.memory_bytes();
  }
  return n;
}

std::optional<Nanos> SystemTimer::next_expiration() const {
  check_thread("next_expiration()");
  std::optional<std::int64_t> best;
  for (const auto& b : bases_) {
    const std::lock_guard<detail::BaseLock> guard(b->mu);
    auto e = b->wheel.next_expiration();
    // Tasks added when already due have been due since (at the latest) the wheel's time when the
    // first of them came, which the wheel's clock, never ahead of the real one, had reached.
    if (!b->due.empty() && (!e || b->due_since < *e)) e = b->due_since;
    if (e && (!best || *e < *best)) best = e;
  }
  if (!best) return std::nullopt;
  return Nanos{*best};
}

}  // namespace purgatory
