// SystemTimer's drivers: advance_clock() (the reaper thread's loop and external drivers), the
// expiry passes, and what an external driver asks (arm()) and is told (the wakeup hook).
//
// A driver sleeps until the earliest non-empty bucket (or the next step of an ahead-of-time
// cascade), never ticking while idle. An expiry pass takes, base after base, first the tasks added
// when already due (those present when the pass began), then the wheel's due buckets, in batches
// of at most kMaxBatch handed to the executor with no lock held; between batches it moves a slice
// of the coarse buckets that come due soon down a level ahead of time, so that no single pass has
// a whole coarse bucket to cascade. docs/design.md has the reasoning and the figures.
#include "purgatory/timer/system_timer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "batch_context.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "system_timer_internal.hpp"
#include "timer_base.hpp"

namespace purgatory {
namespace {

using detail::kForever;
using detail::kNobody;
using detail::what_of;

// Cascade moves of a due coarse bucket done in one hold of a base's lock (Kafka's fallback path,
// when the ahead-of-time cascade did not finish in time).
constexpr std::size_t kMaxMovesPerHold = 1024;
// Ahead-of-time moves per hold of a base's lock; expiries go between slices.
constexpr std::size_t kAheadSlice = 256;
// A coarse bucket this small is moved down in one step, not spread over its window.
constexpr std::size_t kAheadMinChunk = 256;

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
    const std::lock_guard<detail::BaseLock> guard(b->mu);
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

bool SystemTimer::advance_clock(Nanos max_wait) {
  check_thread("ExternalDriver::advance_clock()");
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
    const std::lock_guard<detail::BaseLock> guard(b->mu);
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
        const std::lock_guard<detail::BaseLock> guard(b.mu);
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
                  give_back_unit();
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
    give_back_unit();
    queue_expired(*t, batch);
  }
  if (b.due_quota > 0) return false;
  std::size_t moves = 0;
  return b.wheel.expire_due(now, [&](TimerTask& t) {
    if (b.wheel.add(t, detail::TimingWheel::expiration_of(t))) {
      return ++moves < kMaxMovesPerHold;  // cascaded to a finer level
    }
    --b.pending;
    give_back_unit();
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

std::optional<Nanos> SystemTimer::arm() {
  check_thread("ExternalDriver::arm()");
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

void SystemTimer::attach_driver(std::function<void()> wakeup) {
  const std::lock_guard<std::mutex> guard(drive_mu_);
  if (!external_) {
    throw std::invalid_argument(fmt::format(
        "SystemTimer '{}': an ExternalDriver needs a timer made with Driver::external", name_));
  }
  if (driver_attached_.load(std::memory_order_relaxed)) {
    throw std::invalid_argument(
        fmt::format("SystemTimer '{}': the timer already has a driver (an AsioTimer drives "
                    "itself)",
                    name_));
  }
  wakeup_hook_ = std::move(wakeup);
  driver_attached_.store(true, std::memory_order_seq_cst);
}

void SystemTimer::detach_driver() noexcept {
  // A call that counted itself before this store sees the driver attached and is waited for; one
  // counting itself after it sees it detached (both sides sequentially consistent).
  driver_attached_.store(false, std::memory_order_seq_cst);
  while (hook_calls_.load(std::memory_order_seq_cst) != 0)
    std::this_thread::yield();
  std::function<void()> dropped;  // destroyed after the lock
  const std::lock_guard<std::mutex> guard(drive_mu_);
  dropped = std::move(wakeup_hook_);
  wakeup_hook_ = nullptr;
  external_until_ = kNobody;
  recompute_armed_locked();
}

void SystemTimer::call_wakeup_hook() noexcept {
  if (!driver_attached_.load(std::memory_order_relaxed)) return;  // a reaper, or no driver yet
  hook_calls_.fetch_add(1, std::memory_order_seq_cst);
  if (driver_attached_.load(std::memory_order_seq_cst) && wakeup_hook_) {
    try {
      wakeup_hook_();
    } catch (...) {
      std::fprintf(stderr, "purgatory: timer '%s': the driver's wakeup threw: %s\n", name_.c_str(),
                   what_of(std::current_exception()));
    }
  }
  hook_calls_.fetch_sub(1, std::memory_order_release);
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
