#include "purgatory/timer/system_timer.hpp"

#include "batch_context.hpp"
#include "platform/thread_exit.hpp"
#include "platform/thread_name.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "purgatory/timer/detail/thread_slot.hpp"
#include "purgatory/timer/periodic_task.hpp"
#include "timer_base.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>

#include <fmt/format.h>

namespace purgatory {
namespace detail {
namespace {

constexpr std::uint32_t kUnassigned = std::numeric_limits<std::uint32_t>::max();

// Slots of the live threads: a thread takes the lowest free one and gives it back when it ends,
// so the threads alive at any time hold distinct, dense slots and spread evenly over the bases
// (short-lived threads do not pile up on one base). Never destroyed: threads may end after
// static destructors ran. Built in static storage, not on the heap: assign_thread_slot() is
// noexcept, and out of memory it must still find the table.
struct SlotTable {
  std::mutex mu;
  std::vector<bool> used;  // guarded by mu
};
SlotTable& slot_table() noexcept {
  alignas(SlotTable) static unsigned char storage[sizeof(SlotTable)];
  static SlotTable* const table = new (storage) SlotTable();
  return *table;
}

struct ThreadSlot {
  std::uint32_t slot = kUnassigned;   // what the thread uses (a test may set it)
  std::uint32_t owned = kUnassigned;  // what it took from the table, given back at its end
};
void give_back(ThreadSlot& s) noexcept {
  if (s.owned == kUnassigned) return;
  SlotTable& t = slot_table();
  const std::lock_guard<std::mutex> guard(t.mu);
  t.used[s.owned] = false;
}
// The thread's ThreadSlot, given back when the thread ends.
using ThreadSlots = platform::PerThread<ThreadSlot, &give_back>;
// The slot again, in a plain thread_local: the add path reads just this, with no check that the
// thread's cleanup was registered (ThreadSlots::get() makes that check).
thread_local std::uint32_t t_fast_slot = kUnassigned;

std::uint32_t assign_thread_slot() noexcept {
  ThreadSlot* ts = ThreadSlots::get();
  if (ts == nullptr) return 0;  // the thread is ending (its slot was given back): share slot 0
  if (ts->slot == kUnassigned) {
    SlotTable& t = slot_table();
    const std::lock_guard<std::mutex> guard(t.mu);
    const auto free = std::find(t.used.begin(), t.used.end(), false);
    const auto slot = static_cast<std::uint32_t>(free - t.used.begin());
    try {
      if (free == t.used.end()) {
        t.used.push_back(true);
      } else {
        *free = true;
      }
      ts->owned = slot;
    } catch (...) {
      // Out of memory: share slot 0 (correct, only less spread).
      return 0;
    }
    ts->slot = slot;
  }
  t_fast_slot = ts->slot;
  return ts->slot;
}

}  // namespace

std::uint32_t timer_thread_slot() noexcept {
  const std::uint32_t slot = t_fast_slot;
  return slot != kUnassigned ? slot : assign_thread_slot();
}

void set_timer_thread_slot(std::uint32_t slot) noexcept {
  (void)timer_thread_slot();  // takes (and later gives back) a slot of its own as usual
  if (ThreadSlot* ts = ThreadSlots::get()) ts->slot = slot;
  t_fast_slot = slot;
}

}  // namespace detail

namespace {

constexpr std::int64_t kNobody = std::numeric_limits<std::int64_t>::min();  // armed_: no waiter
constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kUnknownNow = std::numeric_limits<std::int64_t>::min();
// Cascade moves of a due coarse bucket done in one hold of a base's lock (Kafka's fallback path,
// when the ahead-of-time cascade did not finish in time).
constexpr std::size_t kMaxMovesPerHold = 1024;
// Ahead-of-time moves per hold of a base's lock; expiries go between slices.
constexpr std::size_t kAheadSlice = 256;
// A coarse bucket this small is moved down in one step, not spread over its window.
constexpr std::size_t kAheadMinChunk = 256;
constexpr std::size_t kMaxBases = 1024;
// drain(): periodic tasks taken from a base per hold of its lock (references on the stack, so that
// drain() allocates nothing to find them).
constexpr std::size_t kPeriodicChunk = 64;
// close(): room reserved for tasks an add() links while close() is under way.
constexpr std::size_t kCloseSlack = 64;

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

// What an exception says, for stderr; never throws.
const char* what_of(const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "a non-std exception";
  }
}

// Takes out the earliest task of a closed timer's wheel (null when it is empty).
TimerTask* take_one(detail::TimingWheel& wheel) noexcept {
  TimerTask* taken = nullptr;
  (void)wheel.expire_due(kForever, [&taken](TimerTask& t) {
    taken = &t;
    return false;
  });
  return taken;
}

// The state a task takes when handed to an executor: the next sequence number, phase queued.
constexpr std::uint32_t next_ticket(std::uint32_t state, std::uint32_t queued) noexcept {
  return ((state & ~3U) + 4U) | queued;
}

// How many tasks of a coarse bucket to move down now, `last` being when its share was last
// counted: the bucket must be empty a tick (of the level below) before it comes due, and the
// moves are spread evenly over the time left, however often the driver happens to wake.
std::size_t ahead_pace(const detail::TimingWheel::AheadWork& w, std::int64_t last,
                       std::int64_t now) noexcept {
  const std::int64_t finish = w.due - w.finer_tick;
  if (now >= finish || w.tasks <= kAheadMinChunk) return w.tasks;
  const double share = static_cast<double>(w.tasks) * static_cast<double>(now - last) /
                       static_cast<double>(finish - last);
  return std::min(w.tasks, static_cast<std::size_t>(share) + 1);
}

}  // namespace

// ---- TimerTask ---------------------------------------------------------------------------------

detail::TimerBase* TimerTask::base_of_place(std::uintptr_t place) noexcept {
  static_assert(
      alignof(detail::TimerTaskList) > kPlaceBits && alignof(detail::TimerBase) > kPlaceBits,
      "a task's place keeps its tags in the low bits of a bucket's or base's address");
  const std::uintptr_t address = place & ~kPlaceBits;
  if ((place & kBaseTag) != 0) return reinterpret_cast<detail::TimerBase*>(address);
  // A bucket this task is or was in: its base is fixed for the bucket's life (the timer's).
  return address == 0 ? nullptr : reinterpret_cast<const detail::TimerTaskList*>(address)->base_;
}

detail::TimerBase* TimerTask::holding_base() const noexcept {
  const std::uintptr_t place = place_.load(std::memory_order_acquire);
  return (place & kRetired) != 0 ? nullptr : base_of_place(place);
}

detail::TimerBase* TimerTask::last_base() const noexcept {
  return base_of_place(place_.load(std::memory_order_acquire));
}

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
      default: {  // kScheduled: only the holder of its base's lock may unlink it.
        const std::uintptr_t place = place_.load(std::memory_order_acquire);
        if ((place & kRetired) != 0) {
          // An add() took it a few instructions ago and is storing its base, under that base's
          // lock: look again.
          PURGATORY_RACE_POINT("TimerTask::cancel: scheduled, its base not stored yet");
          std::this_thread::yield();
          w = word_.load(std::memory_order_acquire);
          break;
        }
        // Not retired: a bucket (no tag bits) or a tagged base, never null.
        detail::TimerBase* base =
            (place & kBaseTag) != 0 ? reinterpret_cast<detail::TimerBase*>(place & ~kPlaceBits)
                                    : reinterpret_cast<const detail::TimerTaskList*>(place)->base_;
        PURGATORY_RACE_POINT("TimerTask::cancel: saw it scheduled, before the timer's lock");
        if (base->owner->cancel_scheduled(*this, *base, place)) return true;
        w = word_.load(std::memory_order_acquire);
        break;
      }
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
      batches_(std::make_shared<detail::BatchContext>(
          make_error_handler(std::move(options.on_task_error), name_))),
      armed_(kNobody),
      external_until_(kNobody) {
  const std::size_t bases = checked_bases(options.bases);
  const std::int64_t start = clock_->now().count();
  bases_.reserve(bases);
  for (std::size_t i = 0; i < bases; ++i) {
    // The first base checks wheel_size (detail::TimingWheel throws, naming it) before any thread
    // starts.
    bases_.push_back(
        std::make_unique<detail::TimerBase>(*this, tick_.count(), options.wheel_size, start));
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

detail::TimerBase& SystemTimer::my_base() const noexcept {
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
  bool wake = false;
  const auto owns = [this](const detail::TimerBase* b) { return b != nullptr && b->owner == this; };
  for (;;) {
    std::uint64_t w = t.word_.load(std::memory_order_acquire);
    std::uint32_t s = TimerTask::state_of(w);
    // Its base matters only while it is scheduled (an idle or queued task goes to ours).
    detail::TimerBase* held =
        TimerTask::phase_of(s) == TimerTask::kScheduled ? t.holding_base() : nullptr;
    if (TimerTask::phase_of(s) == TimerTask::kScheduled && held == nullptr) {
      // Another add() took it a few instructions ago and is storing its base: look again.
      PURGATORY_RACE_POINT("SystemTimer::schedule: scheduled, its base not stored yet");
      std::this_thread::yield();
      continue;
    }
    // A task scheduled here stays in its base (moved in place); any other goes to ours.
    detail::TimerBase& base =
        TimerTask::phase_of(s) == TimerTask::kScheduled && owns(held) ? *held : my_base();
    std::unique_lock<detail::AdaptiveMutex> lock(base.mu);
    if (closed_.load(std::memory_order_relaxed) || draining_.load(std::memory_order_relaxed)) {
      // While drain() runs (its last expired tasks included) the reason stays `draining`.
      const bool draining = draining_.load(std::memory_order_relaxed);
      throw TimerRejected(
          draining ? TimerRejected::Reason::draining : TimerRejected::Reason::closed,
          fmt::format("SystemTimer '{}': no new tasks accepted after {}", name_,
                      draining ? "drain() started" : "close()"));
    }
    // Checked before any state changes. The wheel's clock is never ahead of the real one but may
    // lag it (it moves only when something expires), so a deadline that looks too far from it is
    // judged again against the clock itself before being refused.
    if (now == kUnknownNow && expiration - base.wheel.current_time() > kMaxDelay.count() &&
        deadline - clock_->now().count() > kMaxDelay.count()) {
      throw std::invalid_argument(
          fmt::format("SystemTimer '{}': deadline {} ns is more than the maximum delay ({} ns) "
                      "after now",
                      name_, deadline, kMaxDelay.count()));
    }
    w = t.word_.load(std::memory_order_acquire);
    s = TimerTask::state_of(w);
    std::uint32_t phase = TimerTask::phase_of(s);
    held = phase == TimerTask::kScheduled ? t.holding_base() : nullptr;
    if (phase == TimerTask::kScheduled && held == nullptr) continue;  // its base being stored
    if (phase != TimerTask::kIdle && !owns(t.last_base())) {
      throw std::invalid_argument(
          fmt::format("SystemTimer '{}': the task is pending in another timer", name_));
    }
    if (phase == TimerTask::kScheduled && held != &base) continue;  // it moved: look again
    if (only_if_pending && phase == TimerTask::kIdle) return false;
    if (base.pending == 0) {  // empty wheel: catch up with the clock, for free
      base.wheel.advance_clock(now != kUnknownNow ? now : clock_->now().count());
    }
    // max_pending bounds the tasks held by the wheels: one due at once never enters them.
    const bool enters_wheel =
        expiration >= 0 && expiration >= base.wheel.current_time() + tick_.count();
    // What the change below allocates is allocated now, so that out of memory the call throws
    // with nothing changed: a wheel level never used before. (A task due at once goes to the
    // base's due list, which allocates nothing.)
    if (enters_wheel) base.wheel.reserve_levels(expiration);
    bool reserved = false;
    if (enters_wheel && phase != TimerTask::kScheduled && max_pending_ != 0) {
      if (limited_pending_.fetch_add(1, std::memory_order_relaxed) >= max_pending_) {
        limited_pending_.fetch_sub(1, std::memory_order_relaxed);
        throw TimerRejected(TimerRejected::Reason::pending_limit,
                            fmt::format("SystemTimer '{}': {} tasks pending, the limit "
                                        "(max_pending)",
                                        name_, max_pending_));
      }
      reserved = true;
    }
    if (phase == TimerTask::kScheduled && t.bucket() == &base.due) {
      // Due already and not yet taken by a pass: it leaves the due list, keeping its reference.
      base.due.remove(t);
    } else if (phase == TimerTask::kScheduled) {
      // Stable: only holders of this base's lock change it. It keeps the wheel's reference.
      detail::TimingWheel::remove(t);
      --base.pending;
      reserved = max_pending_ != 0;  // it holds its unit of the limit already
      if (base.pending == 0) {       // it was alone: catch up as an add into an empty wheel does
        base.wheel.advance_clock(now != kUnknownNow ? now : clock_->now().count());
      }
    } else {
      // Idle, or queued (withdraw that run: its job keeps its own reference and will skip). The
      // CAS makes us the owner against a concurrent cancel(), a job's claim, or another add();
      // the task becomes scheduled and gains the wheel's reference in the same step.
      bool won = false;
      while (phase == TimerTask::kIdle || phase == TimerTask::kQueued) {
        if (only_if_pending && phase == TimerTask::kIdle) break;
        PURGATORY_RACE_POINT("SystemTimer::schedule: state read, before taking the task");
        if (t.word_.compare_exchange_weak(
                w,
                TimerTask::make_word(TimerTask::with_phase(s, TimerTask::kScheduled),
                                     TimerTask::refs_of(w) + 1),
                std::memory_order_acq_rel)) {
          won = true;
          break;
        }
        s = TimerTask::state_of(w);
        phase = TimerTask::phase_of(s);
      }
      if (!won) {
        if (reserved) limited_pending_.fetch_sub(1, std::memory_order_relaxed);
        if (only_if_pending && phase == TimerTask::kIdle) return false;  // its run just started
        continue;
      }
      PURGATORY_RACE_POINT("SystemTimer::schedule: taken, before storing its base");
      // Scheduled, its place marked retired: a cancel() or add() meanwhile yields until this
      // store (one store, not a second read-modify-write of word_ through a linking phase).
      t.place_.store(reinterpret_cast<std::uintptr_t>(&base) | TimerTask::kBaseTag,
                     std::memory_order_release);
    }
    if (enters_wheel && base.wheel.add(t, expiration)) {
      ++base.pending;
      wake = expiration < armed_.load();
    } else {
      // Due already: never run here, inside the caller's add(), but by the next expiry pass
      // (the driver is woken for it when the list was empty). A task re-adding itself from its
      // own run() so goes round the driver's loop instead of nesting a frame per re-add.
      if (reserved) limited_pending_.fetch_sub(1, std::memory_order_relaxed);
      base.due.add(t);
      wake = base.due.size() == 1;
    }
    break;
  }
  PURGATORY_RACE_POINT("SystemTimer::schedule: unlocked, before execute or wake");
  if (wake) wake_drivers();
  return true;
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
  task.word_.fetch_add(TimerTask::state_delta(s, ticket), std::memory_order_acq_rel);
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

void SystemTimer::call_wakeup_hook() noexcept {
  if (!wakeup_hook_) return;
  try {
    wakeup_hook_();
  } catch (...) {
    std::fprintf(stderr, "purgatory: timer '%s': the wakeup hook threw: %s\n", name_.c_str(),
                 what_of(std::current_exception()));
  }
}

bool SystemTimer::cancel_scheduled(TimerTask& task, detail::TimerBase& base,
                                   std::uintptr_t place) noexcept {
  std::uint64_t before = 0;
  bool emptied = false;
  {
    std::lock_guard<detail::AdaptiveMutex> guard(base.mu);
    const std::uint32_t s = task.state();
    // Still scheduled where it was seen (a bucket of `base`), or it moved: look again.
    if (TimerTask::phase_of(s) != TimerTask::kScheduled ||
        task.place_.load(std::memory_order_relaxed) != place) {
      return false;
    }
    if (task.bucket() == &base.due) {
      base.due.remove(task);  // due, not yet taken by a pass: it holds no unit of max_pending
    } else {
      detail::TimingWheel::remove(task);
      --base.pending;
      if (max_pending_ != 0) limited_pending_.fetch_sub(1, std::memory_order_relaxed);
    }
    emptied = base.pending == 0 && base.due.empty();
    retire_base(task);
    // Idle, and the wheel's reference dropped, in one step.
    before = task.word_.fetch_sub(
        TimerTask::state_delta(TimerTask::with_phase(s, TimerTask::kIdle), s) + TimerTask::kOneRef,
        std::memory_order_acq_rel);
  }
  if (TimerTask::refs_of(before) == 1) delete &task;  // that was the last reference
  // An external driver (AsioTimer) looks again, so that no wait stays armed for a deadline that
  // is gone. The reaper thread needs no call: it wakes once at that deadline and finds nothing.
  if (emptied && wakeup_hook_) call_wakeup_hook();
  return true;
}

void SystemTimer::wake_drivers() {
  {
    std::lock_guard<std::mutex> guard(drive_mu_);
    ++wake_requests_;
  }
  cv_.notify_all();
  call_wakeup_hook();
}

void SystemTimer::recompute_armed_locked() noexcept {
  std::int64_t armed = kNobody;
  for (const std::int64_t until : sleeping_until_) {
    armed = armed == kNobody ? until : std::min(armed, until);
  }
  if (external_until_ != kNobody) {
    armed = armed == kNobody ? external_until_ : std::min(armed, external_until_);
  }
  armed_.store(armed);
}

std::optional<std::int64_t> SystemTimer::next_wake(std::int64_t now) const {
  std::optional<std::int64_t> best;
  const auto consider = [&best](std::int64_t t) {
    if (!best || t < *best) best = t;
  };
  for (const auto& b : bases_) {
    const std::lock_guard<detail::AdaptiveMutex> guard(b->mu);
    if (!b->due.empty()) consider(now);  // added when already due: the next pass takes them
    if (b->pending == 0) continue;
    if (const auto e = b->wheel.next_expiration()) consider(*e);
    for (int level = 1; level < b->wheel.levels(); ++level) {
      const auto work = b->wheel.ahead_work(level);
      if (!work) continue;
      // Its next step: at once for a bucket not stepped yet, else a tick (of the level below)
      // after the last one; never after it is due.
      const auto l = static_cast<std::size_t>(level);
      const bool stepped = l < b->ahead_due.size() && b->ahead_due[l] == work->due;
      consider(std::min(work->due, stepped ? b->ahead_last[l] + work->finer_tick : now));
    }
  }
  return best;
}

std::size_t SystemTimer::total_pending() const {
  std::size_t n = 0;
  for (const auto& b : bases_) {
    const std::lock_guard<detail::AdaptiveMutex> guard(b->mu);
    n += b->pending + b->due.size();
  }
  return n;
}

bool SystemTimer::advance_clock(Nanos max_wait) {
  return advance(max_wait, false);
}

bool SystemTimer::advance(Nanos max_wait, bool stop_when_drained, const std::int64_t* deadline) {
  PURGATORY_RACE_POINT("SystemTimer::advance: entered, before the first clock read");
  std::int64_t now = clock_->now().count();
  const std::int64_t until = deadline != nullptr                  ? *deadline
                             : max_wait <= Nanos::zero()          ? now
                             : max_wait.count() >= kForever - now ? kForever
                                                                  : now + max_wait.count();
  for (;;) {
    PURGATORY_RACE_POINT(
        "SystemTimer::advance: looking again, before counting wake requests and reading the clock");
    // While we look at the bases, any add() wakes us (armed_ is "forever"): none is missed
    // between the look and the sleep.
    std::uint64_t requests = 0;
    {
      const std::lock_guard<std::mutex> guard(drive_mu_);
      sleeping_until_.push_back(kForever);
      recompute_armed_locked();
      requests = wake_requests_;
    }
    // The clock read after the count: a manual clock advanced before the count was taken is seen
    // here, one advanced after it changes the count. (With the time read before, an advance in
    // between was neither: the driver slept on a stale time until the next advance, for ever.)
    now = std::max<std::int64_t>(now, clock_->now().count());
    const auto next = next_wake(now);
    const bool act = next && *next <= now;
    const bool stop = !act && (closed_.load() || now >= until || (stop_when_drained && drained()));
    PURGATORY_RACE_POINT("SystemTimer::advance: clock read, before checking the wake requests");
    std::unique_lock<std::mutex> lock(drive_mu_);
    sleeping_until_.erase(std::find(sleeping_until_.begin(), sleeping_until_.end(), kForever));
    if (act || stop || wake_requests_ != requests) {
      recompute_armed_locked();
      lock.unlock();
      if (stop) return false;
      if (act && service(now)) return true;
      // Only ahead-of-time cascading was due, or an add() came meanwhile: look again (the clock
      // is read again at the top).
      if (max_wait <= Nanos::zero() && act) return false;
      continue;
    }
    const std::int64_t target = std::min(next.value_or(kForever), until);
    sleeping_until_.push_back(target);
    recompute_armed_locked();
    clock_->wait_until(lock, cv_, target == kForever ? Nanos::max() : Nanos{target});
    sleeping_until_.erase(std::find(sleeping_until_.begin(), sleeping_until_.end(), target));
    recompute_armed_locked();
    ++wakeups_;
    lock.unlock();
  }
}

bool SystemTimer::service(std::int64_t now) {
  // This pass's share of the ahead-of-time cascading, per base and level.
  for (const auto& b : bases_) {
    const std::lock_guard<detail::AdaptiveMutex> guard(b->mu);
    b->due_quota = b->due.size();  // this pass takes the due tasks there now, not later ones
    const auto levels = static_cast<std::size_t>(b->wheel.levels());
    b->ahead_quota.assign(levels, 0);
    b->ahead_due.resize(levels, kNobody);
    b->ahead_last.resize(levels, 0);
    for (std::size_t level = 1; level < levels; ++level) {
      const auto work = b->wheel.ahead_work(static_cast<int>(level));
      if (!work) continue;
      if (b->ahead_due[level] != work->due) {  // a new bucket: its window started a tick ago
        b->ahead_due[level] = work->due;
        b->ahead_last[level] = work->due - work->tick;
      }
      const std::int64_t last = std::min(b->ahead_last[level], now);
      b->ahead_quota[level] = ahead_pace(*work, last, now);
      b->ahead_last[level] = now;
    }
  }
  bool any_due = false;
  ExpiredBatch batch;
  const std::size_t first = next_start_.fetch_add(1, std::memory_order_relaxed);
  for (;;) {
    bool more = false;
    // A batch from each base in turn, so that no base's backlog holds up another's due tasks.
    for (std::size_t k = 0; k < bases_.size(); ++k) {
      detail::TimerBase& b = *bases_[(first + k) & base_mask_];
      // Room for a whole batch before the lock: out of memory, this throws and the tasks stay in
      // the wheel. (The executor keeps the batch it is given, or runs it and leaves its memory
      // here for the next one.)
      prepare_batch(batch, kMaxBatch);
      {
        const std::lock_guard<detail::AdaptiveMutex> guard(b.mu);
        const bool done = expire_due(b, now, batch);
        if (!done || !batch.empty()) {
          // Due tasks first; the cascade's slice comes once this base has nothing due.
          more = more || !done ||
                 std::any_of(b.ahead_quota.begin(), b.ahead_quota.end(),
                             [](std::size_t q) { return q > 0; });
        } else {
          // Nothing due here: a slice of the ahead-of-time cascade, lowest level first.
          std::size_t budget = kAheadSlice;
          for (std::size_t level = 1; level < b.ahead_quota.size() && budget > 0; ++level) {
            std::size_t& quota = b.ahead_quota[level];
            if (quota == 0) continue;
            const std::size_t want = std::min(quota, budget);
            const std::size_t moved =
                b.wheel.cascade_ahead(static_cast<int>(level), want, [&](TimerTask& t) {
                  // The level below is behind (its current bucket): place it from the top.
                  if (b.wheel.add(t, detail::TimingWheel::expiration_of(t))) return;
                  --b.pending;
                  if (max_pending_ != 0) limited_pending_.fetch_sub(1, std::memory_order_relaxed);
                  queue_expired(t, batch);
                });
            budget -= std::min(budget, moved);
            quota = moved < want ? 0 : quota - moved;  // an emptied bucket ends its quota
            if (quota > 0) more = true;
          }
        }
      }
      if (!batch.empty()) {
        any_due = true;
        PURGATORY_RACE_POINT("SystemTimer::advance: batch expired, unlocked, before execute");
        hand_off(batch);
      }
    }
    if (!more) break;
    now = std::max<std::int64_t>(now, clock_->now().count());  // time moved on while we worked
  }
  if (draining_.load()) wake_drivers();  // a drain() may be waiting for the wheels to empty
  return any_due;
}

bool SystemTimer::expire_due(detail::TimerBase& b, std::int64_t now, ExpiredBatch& batch) {
  // The tasks added when already due come first: their deadlines are before any bucket's.
  while (b.due_quota > 0 && batch.size() < kMaxBatch) {
    TimerTask* t = b.due.pop();
    if (t == nullptr) {  // fewer than counted: some were cancelled or moved meanwhile
      b.due_quota = 0;
      break;
    }
    --b.due_quota;
    queue_expired(*t, batch);
  }
  if (b.due_quota > 0) return false;
  std::size_t moves = 0;
  return b.wheel.expire_due(now, [&](TimerTask& t) {
    if (b.wheel.add(t, detail::TimingWheel::expiration_of(t))) {
      return ++moves < kMaxMovesPerHold;  // cascaded to a finer level
    }
    --b.pending;
    if (max_pending_ != 0) limited_pending_.fetch_sub(1, std::memory_order_relaxed);
    queue_expired(t, batch);
    return batch.size() < kMaxBatch && moves < kMaxMovesPerHold;
  });
}

void SystemTimer::reaper_loop() {
  for (;;) {
    try {
      while (advance_clock(Nanos::max()) || !is_closed()) {
      }
      return;
    } catch (...) {
      // Out of memory for a batch: what was not expired stays scheduled. Try again shortly.
      std::fprintf(stderr, "purgatory: timer '%s': expiry failed (%s); retrying in 1 ms\n",
                   name_.c_str(), what_of(std::current_exception()));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

std::size_t SystemTimer::size() const {
  return total_pending();
}

std::vector<std::size_t> SystemTimer::size_per_level() const {
  std::vector<std::size_t> sizes;
  for (const auto& b : bases_) {
    const std::lock_guard<detail::AdaptiveMutex> guard(b->mu);
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
    const std::lock_guard<detail::AdaptiveMutex> guard(b->mu);
    n += b->wheel.memory_bytes();
  }
  return n;
}

std::optional<Nanos> SystemTimer::next_expiration() const {
  std::optional<std::int64_t> best;
  for (const auto& b : bases_) {
    const std::lock_guard<detail::AdaptiveMutex> guard(b->mu);
    // Tasks added when already due are due now: the wheel's time never runs ahead of the clock.
    const auto e = b->due.empty() ? b->wheel.next_expiration()
                                  : std::optional<std::int64_t>(b->wheel.current_time());
    if (e && (!best || *e < *best)) best = e;
  }
  if (!best) return std::nullopt;
  return Nanos{*best};
}

std::optional<Nanos> SystemTimer::arm() {
  std::uint64_t requests = 0;
  for (;;) {
    {
      const std::lock_guard<std::mutex> guard(drive_mu_);
      external_until_ = kForever;  // while we look, any add() calls the hook
      recompute_armed_locked();
      requests = wake_requests_;
    }
    const auto next = next_wake(clock_->now().count());
    const std::lock_guard<std::mutex> guard(drive_mu_);
    if (wake_requests_ != requests) continue;  // an add() came meanwhile: look again
    external_until_ = next.value_or(kForever);
    recompute_armed_locked();
    if (!next) return std::nullopt;
    return Nanos{*next};
  }
}

void SystemTimer::set_wakeup_hook(std::function<void()> hook) {
  wakeup_hook_ = std::move(hook);
}

std::vector<TaskRef> SystemTimer::drain(Nanos max_wait) {
  if (closed_.load()) return {};
  std::int64_t until = kForever;
  const std::int64_t start = clock_->now().count();
  if (max_wait < Nanos::max() && max_wait.count() < kForever - start) {
    until = start + std::max<std::int64_t>(max_wait.count(), 0);
  }
  // From here on adds are refused; one holding a base's lock now finishes first, and is waited
  // for like any task. The bases are visited one at a time, never all locked at once.
  draining_.store(true);
  cancel_periodic_tasks();
  {
    // The batch that lands last (its tasks run) wakes us: drain() waits for the executor too.
    const std::lock_guard<std::mutex> guard(batches_->mu);
    ++batches_->drainers;
    batches_->timer = &clock_hook_;
  }
  batches_->watched.store(true);
  bool expired_last = false;
  while (!expired_last) {
    try {
      for (;;) {
        const std::int64_t now = clock_->now().count();
        if (now >= until || !advance(Nanos{until - now}, /*stop_when_drained=*/true, &until)) {
          if (drained() || closed_.load() || clock_->now().count() >= until) break;
        }
      }
      // The clock may have reached the end of the wait before we looked: what is due by then
      // runs.
      if (!closed_.load()) (void)advance(Nanos::zero(), /*stop_when_drained=*/true);
      expired_last = true;
    } catch (...) {
      // Out of memory for a batch: what was not expired is still scheduled. Keep trying until
      // the wait ends; close() then hands back what is left.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      expired_last = closed_.load() || clock_->now().count() >= until;
    }
  }
  {
    const std::lock_guard<std::mutex> guard(batches_->mu);
    if (--batches_->drainers == 0) {
      batches_->watched.store(false);
      batches_->timer = nullptr;
    }
  }
  std::vector<TaskRef> handed_back = close();  // adds from the last tasks still say `draining`
  draining_.store(false);
  return handed_back;
}

void SystemTimer::cancel_periodic_tasks() {
  for (const auto& b : bases_) {
    for (bool more = true; more;) {
      // References taken under the lock, released after it (a release may destroy the task).
      std::array<TaskRef, kPeriodicChunk> found;
      std::size_t n = 0;
      more = false;
      {
        const std::lock_guard<detail::AdaptiveMutex> guard(b->mu);
        b->wheel.for_each_task([&](TimerTask& t) {
          if (dynamic_cast<PeriodicTask*>(&t) == nullptr) return;
          if (n < found.size()) {
            found[n++] = TaskRef(&t);
          } else {
            more = true;  // cancelled tasks leave the wheel: the next look finds the rest
          }
        });
      }
      // Outside the lock: cancel() takes the periodic task's own lock, then a base's.
      for (std::size_t i = 0; i < n; ++i)
        (void)found[i]->cancel();
    }
  }
}

bool SystemTimer::drained() const {
  if (total_pending() != 0) return false;
  // Read after the wheels: a batch counts from the moment its first task left a wheel, under
  // that wheel's lock.
  if (batches_->in_flight.load() == 0) return true;
  PURGATORY_RACE_POINT(
      "SystemTimer::drain: the wheels are empty, tasks handed to the executor not yet run");
  return false;
}

std::vector<TaskRef> SystemTimer::close() {
  std::vector<TaskRef> handed_back;
  if (closed_.load()) return handed_back;
  try {
    handed_back.reserve(total_pending() + kCloseSlack);
  } catch (const std::bad_alloc&) {
    // hand_back_all() tries again per base, and drops what it has no room for.
  }
  if (closed_.exchange(true)) return handed_back;
  // One base at a time: an add() that held a base's lock when closed_ was set finishes linking
  // its task before we get that lock, and we hand the task back with the others.
  for (const auto& b : bases_) {
    PURGATORY_RACE_POINT("SystemTimer::close: closed, before handing back a base's tasks");
    hand_back_all(*b, handed_back);
  }
  {
    const std::lock_guard<std::mutex> guard(drive_mu_);
    ++wake_requests_;
  }
  PURGATORY_RACE_POINT("SystemTimer::close: closed, unlocked, before joining the reaper");
  cv_.notify_all();
  call_wakeup_hook();  // an external driver re-arms: nothing left, so it stops waiting
  if (reaper_.joinable()) reaper_.join();
  if (owns_executor_) executor_->shutdown();  // runs what already expired, then joins
  return handed_back;
}

void SystemTimer::hand_back_all(detail::TimerBase& b, std::vector<TaskRef>& out) noexcept {
  // A wheel's task gives back its unit of max_pending; a due one holds none.
  const auto hand_back = [this](TimerTask& t, bool from_wheel) {
    const std::uint32_t s = t.state();
    retire_base(t);
    t.word_.fetch_add(TimerTask::state_delta(s, TimerTask::with_phase(s, TimerTask::kIdle)),
                      std::memory_order_acq_rel);
    if (from_wheel && max_pending_ != 0) limited_pending_.fetch_sub(1, std::memory_order_relaxed);
  };
  for (;;) {
    TaskRef dropped;  // released after the lock: a release may destroy the task
    {
      const std::lock_guard<detail::AdaptiveMutex> guard(b.mu);
      const std::size_t held = b.pending + b.due.size();
      if (held == 0) return;
      if (out.capacity() - out.size() < held) {
        try {
          out.reserve(out.size() + held);
        } catch (const std::bad_alloc&) {
        }
      }
      if (out.capacity() - out.size() >= held) {
        b.due.flush([&](TimerTask& t) {
          hand_back(t, false);
          out.emplace_back(&t, /*add_ref=*/false);  // adopt the list's reference
        });
        b.due_quota = 0;
        b.wheel.drain([&](TimerTask& t) {
          hand_back(t, true);
          out.emplace_back(&t, /*add_ref=*/false);  // adopt the wheel's reference
        });
        b.pending = 0;
        return;
      }
      // Out of memory: this one is handed back by dropping the wheel's (or the list's) reference.
      TimerTask* t = b.due.pop();
      const bool from_wheel = t == nullptr;
      if (from_wheel) {
        t = take_one(b.wheel);
        --b.pending;
      }
      hand_back(*t, from_wheel);
      dropped = TaskRef(t, /*add_ref=*/false);
    }
  }
}

bool SystemTimer::is_closed() const {
  return closed_.load();
}

std::uint64_t SystemTimer::wakeups() const {
  std::lock_guard<std::mutex> guard(drive_mu_);
  return wakeups_;
}

void SystemTimer::on_clock_advanced() noexcept {
  {
    // Counted, as advance() expects: a driver that read the clock just before this advance sees
    // the count change at its check and looks again. (Only locking here left that driver asleep
    // for ever when no advance followed: drain(1s) hung about 1 run in 20 under TSan.)
    std::lock_guard<std::mutex> guard(drive_mu_);
    ++wake_requests_;
  }
  cv_.notify_all();
}

}  // namespace purgatory
