// Internal: what the purgatory and the drivers (ExternalDriver, AsioTimer's) need of a SystemTimer
// beyond its public API. Not for users.
#pragma once

#include <functional>
#include <optional>
#include <utility>

#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory::detail {

struct TimerAccess {
  // SystemTimer::add_at() for a task the caller holds a reference to, without a Ref of its own
  // (a DelayedOperation's timeout: its TimerTask base is private).
  static void add_at(SystemTimer& timer, TimerTask& task, Nanos deadline) {
    timer.add_task_at(task, deadline);
  }
  static void add_at(SystemTimer& timer, TimerTask& task, Nanos deadline, Nanos slack) {
    timer.add_task_at(task, deadline, slack);
  }

  // The external driver's calls (external_driver.hpp states their contract).
  static void attach_driver(SystemTimer& timer, std::function<void()> wakeup) {
    timer.attach_driver(std::move(wakeup));
  }
  static void detach_driver(SystemTimer& timer) noexcept { timer.detach_driver(); }
  static std::optional<Nanos> arm(SystemTimer& timer) { return timer.arm(); }
  static bool advance_clock(SystemTimer& timer, Nanos max_wait) {
    return timer.advance_clock(max_wait);
  }
};

}  // namespace purgatory::detail
