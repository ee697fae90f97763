// Internal (platform layer): sleeping until an atomic word changes, and waking the sleepers.
//
// std::atomic::wait() and notify_*() wherever the standard library implements them soundly: on a
// futex (Linux), ulock (libc++ on macOS) or WaitOnAddress (MSVC). libstdc++ 12 without a platform
// wait (MinGW-w64) falls back to a condition variable whose notify does not take the mutex its
// waiters check the word under, so a wake-up sent between a waiter's check and its sleep is lost
// and the waiter sleeps for good. There, a small table of mutexes and condition variables hashed
// by address stands in, and the waker takes the slot's mutex before it notifies.
//
// Header-only: the purgatory library includes it too (its lock and its shutdown() sleep this
// way). A waiter and its waker are always in the same library, so each library's own table is
// enough.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#if defined(_WIN32) && defined(__GLIBCXX__)
#define PURGATORY_PARKING_TABLE 1
#endif

namespace purgatory::platform {

#if defined(PURGATORY_PARKING_TABLE)
struct ParkingSlot {
  std::mutex mu;
  std::condition_variable cv;
};

// Never destroyed: a thread may sleep or wake after static destructors ran.
inline ParkingSlot& parking_slot(const void* address) noexcept {
  constexpr std::size_t kSlots = 64;
  static ParkingSlot* const slots = new ParkingSlot[kSlots];
  const auto bits = reinterpret_cast<std::uintptr_t>(address);
  return slots[(bits >> 3) % kSlots];
}
#endif

// Returns once `word` holds something other than `old` (it may return spuriously early only as
// std::atomic::wait() may not: callers recheck the word anyway).
template <class T>
void wait_while_equal(std::atomic<T>& word, T old, std::memory_order order) noexcept {
#if defined(PURGATORY_PARKING_TABLE)
  ParkingSlot& slot = parking_slot(&word);
  std::unique_lock lock(slot.mu);
  while (word.load(order) == old)
    slot.cv.wait(lock);
#else
  word.wait(old, order);
#endif
}

#if defined(PURGATORY_PARKING_TABLE)
// Wakes every thread sleeping on the slot `address` hashes to (several words share a slot, so
// waking only one sleeper could wake another word's). Taking the slot's mutex first orders this
// after a sleeper's check of its word.
inline void wake_slot(const void* address) noexcept {
  ParkingSlot& slot = parking_slot(address);
  { const std::lock_guard lock(slot.mu); }
  slot.cv.notify_all();
}
#endif

// Wakes at least one thread sleeping in wait_while_equal(word, ...), after `word` changed.
template <class T>
void wake_one(std::atomic<T>& word) noexcept {
#if defined(PURGATORY_PARKING_TABLE)
  wake_slot(&word);
#else
  word.notify_one();
#endif
}

// Wakes every thread sleeping in wait_while_equal(word, ...), after `word` changed.
template <class T>
void wake_all(std::atomic<T>& word) noexcept {
#if defined(PURGATORY_PARKING_TABLE)
  wake_slot(&word);
#else
  word.notify_all();
#endif
}

}  // namespace purgatory::platform
