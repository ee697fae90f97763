/// @file
/// Version 0.1's header of TimerTaskList, now an implementation detail of SystemTimer.
#pragma once

#include "purgatory/timer/detail/timer_task_list.hpp"

namespace purgatory {
/// Version 0.1's name; not part of the API any more.
using TimerTaskList [[deprecated("an implementation detail of SystemTimer")]] =
    detail::TimerTaskList;
}  // namespace purgatory
