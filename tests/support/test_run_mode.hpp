// Which timer mode a test binary's run exercises: its command line's --timer-concurrency (read by
// tests/doctest_main.cpp). The contract, model and sweep suites run twice under CTest, once as
// built (thread-safe timers) and once with --timer-concurrency=single_thread, where every timer a
// test drives by hand (driven_by_hand(), ManualTimer) is made in TimerOptions::Concurrency::
// single_thread unless the test asks for a thread-safe one (it calls the timer from more than one
// thread). No dependency on the library: the doctest main includes it.
#pragma once

namespace purgatory::test {

// Set once by main() before any test runs; read-only after.
inline bool& single_thread_run() noexcept {
  static bool single_thread = false;
  return single_thread;
}

}  // namespace purgatory::test
