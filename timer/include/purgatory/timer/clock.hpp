/// @file
/// Injectable monotonic clocks for SystemTimer.
///
/// The timer never reads the time by itself: it asks a Clock. Production code uses SteadyClock
/// (std::chrono::steady_clock); tests use ManualClock, which only moves when the test calls
/// advance(), so every deadline in a test is exact and the suite runs in microseconds (the role of
/// Kafka's MockTime, seastar's manual_clock, abseil's SimulatedClock).
///
/// A clock also knows how to sleep until one of its own instants, because "wait 5 ms" means
/// something different on a manual clock: the reaper thread of a timer on a ManualClock sleeps
/// until the test advances the clock far enough, never on real time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "purgatory/timer/export.hpp"

namespace purgatory {

/// Time on a Clock: nanoseconds since the clock's own epoch. Monotonic, never negative.
using Nanos = std::chrono::nanoseconds;

namespace detail {
// Something that sleeps on a Clock and must be woken when a manual clock jumps (SystemTimer's
// driver side). ManualClock::advance() calls on_clock_advanced() after the time moved; it must not
// call back into the clock.
class PURGATORY_TIMER_EXPORT ClockWaiter {
 public:
  virtual void on_clock_advanced() noexcept = 0;

 protected:
  ~ClockWaiter() = default;
};
}  // namespace detail

/// A monotonic time source. Implementations are thread-safe.
class PURGATORY_TIMER_EXPORT Clock {
 public:
  virtual ~Clock() = default;

  /// The current instant. Never decreases.
  [[nodiscard]] virtual Nanos now() const noexcept = 0;

  /// Blocks on `cv` (whose mutex `lock` holds) until now() >= deadline, a notification, or a
  /// spurious wake-up; the caller re-checks its condition. A deadline of Nanos::max() waits for a
  /// notification only: this is how an idle timer sleeps without any wake-ups.
  virtual void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          Nanos deadline) const = 0;

  /// A waiter that must hear of manual jumps. Real-time clocks ignore these.
  virtual void add_waiter(detail::ClockWaiter* /*waiter*/) const {}
  /// Undoes add_waiter(): `waiter` hears of no more jumps.
  virtual void remove_waiter(detail::ClockWaiter* /*waiter*/) const {}
};

/// The clock of std::chrono::steady_clock. Thread-safe. Its instants are steady_clock's
/// time_since_epoch(), so they convert exactly to steady_clock::time_point (the Asio driver relies
/// on this).
class PURGATORY_TIMER_EXPORT SteadyClock final : public Clock {
 public:
  [[nodiscard]] Nanos now() const noexcept override {
    return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
  }
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  Nanos deadline) const override;

  /// A process-wide instance, the default clock of every SystemTimer.
  static const SteadyClock& instance() noexcept;
};

/// A clock that moves only when told to. Thread-safe: advance() may be called from any thread
/// while timers read it; waiters registered with add_waiter() are woken after each move.
class PURGATORY_TIMER_EXPORT ManualClock final : public Clock {
 public:
  /// A clock that reads `start` until advanced.
  explicit ManualClock(Nanos start = Nanos{0}) : now_(start.count()) {}

  [[nodiscard]] Nanos now() const noexcept override {
    return Nanos{now_.load(std::memory_order_acquire)};
  }

  /// Moves the clock forward by `by` (must be >= 0) and wakes every registered waiter.
  /// Throws std::invalid_argument for a negative step: a monotonic clock cannot go back.
  void advance(Nanos by);

  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  Nanos deadline) const override;
  void add_waiter(detail::ClockWaiter* waiter) const override;
  void remove_waiter(detail::ClockWaiter* waiter) const override;

 private:
  std::atomic<Nanos::rep> now_;
  mutable std::mutex waiters_mu_;
  mutable std::vector<detail::ClockWaiter*> waiters_;  // guarded by waiters_mu_
};

}  // namespace purgatory
