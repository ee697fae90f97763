// Thread helpers of the tests: a call made from another thread, and waiting for what other
// threads do without hanging when they never do it.
#pragma once

#include <chrono>
#include <thread>
#include <utility>

namespace purgatory::test {

// Runs `f` on a thread of its own and returns once it has returned: a call "from another thread"
// made at this point of this thread's work.
template <class F>
void on_another_thread(F&& f) {
  std::thread other(std::forward<F>(f));
  other.join();
}

// Yields until `cond` holds or `timeout` has passed; returns whether it held.
template <class Cond>
bool spin_until(Cond cond, std::chrono::milliseconds timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace purgatory::test
