// Private to SystemTimer's sources (system_timer*.cpp, timer_task.cpp): what they share.
//
// SystemTimer's members, by the locks that guard them:
//   - each base's `mu` guards that base's wheel, due list, pending count and cascade state;
//   - `drive_mu_` guards the drivers' bookkeeping: sleeping_until_, external_until_,
//     wake_requests_, wakeups_ (armed_ is written under it, read without it);
//   - closed_, draining_ and limited_pending_ are atomics read without a lock;
//   - wakeup_hook_ is written under drive_mu_ by attach_driver() and detach_driver(), and read
//     without a lock while driver_attached_ is true (detach_driver() waits for the calls under
//     way, counted in hook_calls_).
// No lock is held while a task, the executor or a hook runs; a base's lock is never taken while
// drive_mu_ is held, and two bases' locks are never held at once.
//
// The sources, by concern: system_timer.cpp builds the timer and holds the add path (add, add_at,
// reschedule, their cancel); system_timer_expiry.cpp the drivers (advance_clock, the reaper, the
// external driver's arm(), the expiry passes); system_timer_shutdown.cpp drain() and close();
// timer_task.cpp TimerTask's own side of the state word; thread_slot.cpp which base a thread uses.
#pragma once

#include <cstdint>
#include <exception>
#include <limits>

namespace purgatory::detail {

// armed_ when no driver waits.
inline constexpr std::int64_t kNobody = std::numeric_limits<std::int64_t>::min();
// A wait with no end.
inline constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();
// schedule()'s `now` when the caller did not read the clock (add_at()).
inline constexpr std::int64_t kUnknownNow = std::numeric_limits<std::int64_t>::min();

// What an exception says, for stderr; never throws.
inline const char* what_of(const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "a non-std exception";
  }
}

}  // namespace purgatory::detail
