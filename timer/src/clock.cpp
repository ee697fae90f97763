#include "purgatory/timer/clock.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace purgatory {

void SteadyClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                             Nanos deadline) const {
  if (deadline == Nanos::max()) {
    cv.wait(lock);
    return;
  }
  cv.wait_until(lock,
                std::chrono::steady_clock::time_point(
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline)));
}

const SteadyClock& SteadyClock::instance() noexcept {
  static const SteadyClock clock;
  return clock;
}

void ManualClock::advance(Nanos by) {
  if (by < Nanos::zero()) {
    throw std::invalid_argument(
        fmt::format("ManualClock::advance: step must be >= 0 ns, got {} ns", by.count()));
  }
  now_.fetch_add(by.count(), std::memory_order_acq_rel);
  std::lock_guard<std::mutex> guard(waiters_mu_);
  for (detail::ClockWaiter* w : waiters_)
    w->on_clock_advanced();
}

void ManualClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                             Nanos /*deadline*/) const {
  // Manual time only moves through advance(), which wakes registered waiters: sleep until then.
  cv.wait(lock);
}

void ManualClock::add_waiter(detail::ClockWaiter* waiter) const {
  std::lock_guard<std::mutex> guard(waiters_mu_);
  waiters_.push_back(waiter);
}

void ManualClock::remove_waiter(detail::ClockWaiter* waiter) const {
  std::lock_guard<std::mutex> guard(waiters_mu_);
  waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), waiter), waiters_.end());
}

}  // namespace purgatory
