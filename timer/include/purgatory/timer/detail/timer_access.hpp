// Internal: what the purgatory needs of a SystemTimer beyond its public API. Not for users.
#pragma once

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
};

}  // namespace purgatory::detail
