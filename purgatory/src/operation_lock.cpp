#include "purgatory/detail/operation_lock.hpp"

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "platform/atomic_wait.hpp"
#include "purgatory/timer/detail/race_point.hpp"

namespace purgatory {

namespace {

// Numbers handed out so far (the next one). Trivially destructible: threads may take a number
// after static destructors ran.
std::atomic<std::uint64_t> g_next_thread_number{1};

// Loads of a held word before a thread sleeps on it (std::atomic::wait spins a little more).
constexpr int kSpins = 64;

}  // namespace

std::uint64_t detail::lock_thread_number() noexcept {
  // Constant-initialized, trivially destructible: one thread-local load after the first call.
  static thread_local std::uint64_t number = 0;
  if (number == 0) [[unlikely]] {
    const std::uint64_t n = g_next_thread_number.fetch_add(1, std::memory_order_relaxed);
    if (n >> 48 != 0) {
      // 2^48 threads started in one process: a number would not fit beside the depth.
      std::fputs("purgatory: OperationLock ran out of thread numbers\n", stderr);
      std::terminate();
    }
    number = n;
  }
  return number;
}

bool detail::OperationLock::reenter(std::uint64_t w, bool or_throw) {
  if (depth_of(w) == kMaxDepth) {
    if (!or_throw) return false;
    throw std::overflow_error("OperationLock: lock() by a thread that already holds it " +
                              std::to_string(kMaxDepth) + " times, the most it counts");
  }
  // Only the owner changes the depth; a waiter may add kSleepers meanwhile.
  word_.fetch_add(kOneHold, std::memory_order_relaxed);
  return true;
}

void detail::OperationLock::lock_contended(std::uint64_t me) noexcept {
  for (int spin = 0; spin < kSpins; ++spin) {
    std::uint64_t w = word_.load(std::memory_order_relaxed);
    if (w == 0 && word_.compare_exchange_weak(w, held_once_by(me), std::memory_order_acquire,
                                              std::memory_order_relaxed)) {
      return;
    }
  }
  // Sleep until a release wakes us. A thread that slept takes the lock with kSleepers set: others
  // may still sleep, and its own release must wake the next.
  for (;;) {
    std::uint64_t w = word_.load(std::memory_order_relaxed);
    if (w == 0) {
      if (word_.compare_exchange_weak(w, held_once_by(me) | kSleepers, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        return;
      }
      continue;
    }
    if ((w & kSleepers) == 0 &&
        !word_.compare_exchange_weak(w, w | kSleepers, std::memory_order_relaxed,
                                     std::memory_order_relaxed)) {
      continue;
    }
    PURGATORY_RACE_POINT("OperationLock::lock: marked a sleeper, before the wait");
    platform::wait_while_equal(word_, w | kSleepers, std::memory_order_relaxed);
  }
}

void detail::OperationLock::wake_one() noexcept {
  platform::wake_one(word_);
}

}  // namespace purgatory
