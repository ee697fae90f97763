// detail::TimerBase, private to the timer's sources: one wheel and the lock guarding it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "purgatory/timer/detail/platform.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "timing_wheel.hpp"

namespace purgatory::detail {

// A base's lock, taken only by a thread-safe timer (TimerOptions::Concurrency): a single_thread
// timer's calls all come from one thread, so lock() and unlock() do nothing there. Lockable.
class BaseLock {
 public:
  explicit BaseLock(bool single_thread) noexcept : single_thread_(single_thread) {}
  BaseLock(const BaseLock&) = delete;
  BaseLock& operator=(const BaseLock&) = delete;
  void lock() noexcept {
    if (!single_thread_) mu_.lock();
  }
  void unlock() noexcept {
    if (!single_thread_) mu_.unlock();
  }
  [[nodiscard]] bool single_thread() const noexcept { return single_thread_; }

 private:
  AdaptiveMutex mu_;
  const bool single_thread_;
};

// One timer base: a hierarchical wheel and the lock guarding it. A thread adds to its own base
// (thread_slot.hpp), so two threads adding at once take two locks and touch two sets of cache
// lines; the alignment keeps two bases off one line.
struct alignas(64) TimerBase {
  TimerBase(SystemTimer& o, std::int64_t tick, int wheel_size, std::int64_t start, bool one_thread)
      : owner(&o), mu(one_thread), wheel(tick, wheel_size, start) {
    wheel.attach(this);
    due.base_ = this;  // a task's place in it names this base, as a bucket's does
  }

  SystemTimer* const owner;
  BaseLock mu;              // does nothing in a single_thread timer
  TimingWheel wheel;        // guarded by mu
  std::size_t pending = 0;  // guarded by mu (== wheel.size())
  // Tasks added when already due, waiting for the next expiry pass (guarded by mu): an add()
  // never runs a task itself. Scheduled and cancellable like the wheel's; not counted in pending
  // nor against max_pending. due_quota: how many of them the pass under way still takes (those
  // present when it began, so a task re-adding itself from its run() waits for the next pass).
  TimerTaskList due;
  std::size_t due_quota = 0;
  std::int64_t due_since = 0;  // the wheel's time when `due` last became non-empty
  // Ahead-of-time cascading, per level (index 1 is the first overflow level), guarded by mu: what
  // is still to do in the current service pass, and for the bucket being drained (due at
  // ahead_due) when its share was last counted.
  std::vector<std::size_t> ahead_quota;
  std::vector<std::int64_t> ahead_due;
  std::vector<std::int64_t> ahead_last;
};

}  // namespace purgatory::detail
