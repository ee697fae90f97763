// Internal: which base of a SystemTimer the calling thread adds to.
//
// Every thread takes the next slot number the first time it adds to any timer; a timer with B
// bases uses base (slot % B). Threads of one process therefore spread over the bases, and a thread
// keeps adding to the same base (its cache lines stay on its core). Tests set the slot to choose a
// base deterministically.
#pragma once

#include <cstdint>

#include "purgatory/timer/export.hpp"

namespace purgatory::detail {

// The calling thread's slot (assigned on first use).
PURGATORY_TIMER_EXPORT std::uint32_t timer_thread_slot() noexcept;
// Sets the calling thread's slot (tests: to pick the base a single thread adds to).
PURGATORY_TIMER_EXPORT void set_timer_thread_slot(std::uint32_t slot) noexcept;

}  // namespace purgatory::detail
