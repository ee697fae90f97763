// Fault injection for the allocation sweep: the k-th allocation a scenario makes fails.
//
// The sweep binary replaces the global operator new and new[] (every form: sized, aligned,
// nothrow), and installs the hooked timer library's allocation fault hook, which the task pool
// asks where it refills (timer/detail/race_point.hpp). Both count the allocations of the thread
// that armed them, and make the k-th fail (std::bad_alloc; the nothrow forms return null), or with
// Mode::persistent the k-th and every later one. Other threads (an executor's, Asio's system
// executor's) are never counted nor failed.
//
// To find where a run's failed allocation was made: PURGATORY_SWEEP_TRACE=<k> prints a backtrace
// (to stderr, unsymbolized: addr2line resolves it) at the failure of every transient run k.
//
// Under ThreadSanitizer, whose runtime defines operator new itself, only the task pool's refill
// is failed (operator_new_failed() is false there); under AddressSanitizer the task pool is off,
// so every task and operation comes from operator new.
#pragma once

#include <cstdint>

namespace purgatory::sweep {

enum class Mode {
  transient,   // only the k-th allocation fails
  persistent,  // the k-th and every one after it fail
};

struct Counts {
  std::uint64_t allocations = 0;  // reached while armed (failed ones included)
  std::uint64_t injected = 0;     // of which failed
};

// Arms the calling thread: its `fail_at`-th allocation from now on fails (0: none, counting
// only). Installs the task pool's hook on first use (built against the hooked libraries only).
void arm(std::uint64_t fail_at, Mode mode) noexcept;
// Stops counting on the calling thread and returns what it counted.
Counts disarm() noexcept;

// While one lives, the calling thread's allocations are neither counted nor failed: the test's
// own bookkeeping (messages, lists of outcomes) is not part of the scenario.
class Unarmed {
 public:
  Unarmed() noexcept;
  ~Unarmed();
  Unarmed(const Unarmed&) = delete;
  Unarmed& operator=(const Unarmed&) = delete;

 private:
  bool was_armed_;
};

// Whether the calling thread runs with every allocation from the k-th on failing.
bool persistent_run() noexcept;

// Whether operator new is replaced in this build (false under ThreadSanitizer).
bool operator_new_failed() noexcept;

}  // namespace purgatory::sweep
