// Test-only race windows (and allocation failures, below): PURGATORY_RACE_POINT("name") marks a
// place between a check and the action that depends on it (unlock then add, claim then link, copy
// then complete), where another thread acting at the wrong moment would break a promise if the code
// were wrong.
//
// In every normal build the macro expands to nothing. The test-only libraries
// (purgatory_timer_hooked, purgatory_purgatory_hooked) are compiled with PURGATORY_RACE_HOOKS, and
// there each point calls the hook a test installed: tests/support/race_schedule.hpp yields or
// sleeps there on a seeded random schedule, so a race that would hit once in 10^3 runs hits in
// every run, and a failing seed replays.
#pragma once

#if defined(PURGATORY_RACE_HOOKS)

namespace purgatory::detail {

// Called at every race point with its name (a string literal). Must be thread-safe; must not call
// back into the library.
using RacePointHook = void (*)(const char* where) noexcept;

// Installs `hook` (null: none). Not synchronized with points already running on other threads:
// install before the threads start, remove after they stopped.
void set_race_point_hook(RacePointHook hook) noexcept;

void race_point(const char* where) noexcept;

}  // namespace purgatory::detail

#define PURGATORY_RACE_POINT(where) ::purgatory::detail::race_point(where)

namespace purgatory::detail {

// Test-only allocation failures. The library's own allocator (the task pool) asks
// PURGATORY_ALLOCATION_FAULT() where it refills; the allocation sweep
// (tests/sweeps) installs a hook that makes the k-th allocation of a scenario fail
// there as it does in operator new. True: throw std::bad_alloc. Installed like the race hook.
using AllocationFaultHook = bool (*)() noexcept;
void set_allocation_fault_hook(AllocationFaultHook hook) noexcept;
bool allocation_fault() noexcept;

}  // namespace purgatory::detail

#define PURGATORY_ALLOCATION_FAULT() ::purgatory::detail::allocation_fault()

#else

#define PURGATORY_RACE_POINT(where) static_cast<void>(0)
#define PURGATORY_ALLOCATION_FAULT() false

#endif
