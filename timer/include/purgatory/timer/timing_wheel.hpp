/// @file
/// Version 0.1's header of TimingWheel, now an implementation detail of SystemTimer.
#pragma once

#include "purgatory/timer/detail/timing_wheel.hpp"

namespace purgatory {
/// Version 0.1's name; not part of the API any more.
using TimingWheel [[deprecated("an implementation detail of SystemTimer")]] = detail::TimingWheel;
}  // namespace purgatory
