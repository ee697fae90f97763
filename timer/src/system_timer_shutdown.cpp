// SystemTimer's ends: drain() (stop taking tasks, run what is pending, then close) and close()
// (stop, hand back what is still scheduled). Both visit the bases one at a time, never holding two
// bases' locks, and never fail: out of memory they hand tasks back one by one.
#include "purgatory/timer/system_timer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <new>
#include <thread>

#include "batch_context.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "purgatory/timer/periodic_task.hpp"
#include "system_timer_internal.hpp"
#include "timer_base.hpp"

namespace purgatory {
namespace {

using detail::kForever;

// drain(): periodic tasks taken from a base per hold of its lock (references on the stack, so that
// drain() allocates nothing to find them).
constexpr std::size_t kPeriodicChunk = 64;
// close(): room reserved for tasks an add() links while close() is under way.
constexpr std::size_t kCloseSlack = 64;

// Takes out the earliest task of a closed timer's wheel (null when it is empty).
TimerTask* take_one(detail::TimingWheel& wheel) noexcept {
  TimerTask* taken = nullptr;
  (void)wheel.expire_due(kForever, [&taken](TimerTask& t) {
    taken = &t;
    return false;
  });
  return taken;
}

}  // namespace

std::vector<TaskRef> SystemTimer::drain(Nanos max_wait) {
  check_thread("drain()");
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
        const std::lock_guard<detail::BaseLock> guard(b->mu);
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
  // Each gives back its unit of max_pending.
  const auto hand_back = [this](TimerTask& t) {
    const std::uint32_t s = t.state();
    retire_base(t);
    t.word_.fetch_add(TimerTask::state_delta(s, TimerTask::with_phase(s, TimerTask::kIdle)),
                      std::memory_order_acq_rel);
    give_back_unit();
  };
  for (;;) {
    TaskRef dropped;  // released after the lock: a release may destroy the task
    {
      const std::lock_guard<detail::BaseLock> guard(b.mu);
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
          hand_back(t);
          out.emplace_back(&t, /*add_ref=*/false);  // adopt the list's reference
        });
        b.due_quota = 0;
        b.wheel.drain([&](TimerTask& t) {
          hand_back(t);
          out.emplace_back(&t, /*add_ref=*/false);  // adopt the wheel's reference
        });
        b.pending = 0;
        return;
      }
      // Out of memory: this one is handed back by dropping the wheel's (or the list's) reference.
      TimerTask* t = b.due.pop();
      if (t == nullptr) {
        t = take_one(b.wheel);
        --b.pending;
      }
      hand_back(*t);
      dropped = TaskRef(t, /*add_ref=*/false);
    }
  }
}

bool SystemTimer::is_closed() const {
  return closed_.load();
}

}  // namespace purgatory
