// Internal: the per-operation lock of a DelayedOperation. Not for users.
//
// A re-entrant mutex that knows its owner. Re-entrant because Kafka's idiom runs user code under
// it that may legitimately re-enter (try_complete() calling force_complete() on its own operation,
// a thread that holds the lock checking a key that watches the operation). Knowing the owner lets
// DelayedOperation tell "a completion decided inside try_complete()" (whose callbacks must wait
// until the lock is released) from one decided by an outside thread.
//
// One word, because every waiting request carries one: the owner's thread number, how many times
// it holds the lock, and whether anyone sleeps on it. Taking a free lock is one compare-and-swap,
// releasing it one exchange; a thread that finds it held spins briefly (the holder's sections are
// short), then sleeps on the word (std::atomic wait/notify, or the platform's stand-in where
// that is unsound) and is woken by the release.
#pragma once

#include <atomic>
#include <cstdint>

#include "purgatory/export.hpp"

namespace purgatory::detail {

// The calling thread's number for OperationLock: nonzero, never reused in the process. Out of
// line, so that every module of a program (shared libraries included) sees one number per thread.
[[nodiscard]] PURGATORY_EXPORT std::uint64_t lock_thread_number() noexcept;

// A re-entrant mutex that knows its owner, in one word (see the file's overview).
// Thread-safe. Lockable (lock/try_lock/unlock); the owner may lock again, and must unlock as
// often (up to kMaxDepth holds at once: lock() throws std::overflow_error past that, try_lock()
// returns false).
class PURGATORY_EXPORT OperationLock {
 public:
  // Most holds one owner may have at once.
  static constexpr std::uint32_t kMaxDepth = (1U << 15) - 1;

  OperationLock() = default;
  OperationLock(const OperationLock&) = delete;
  OperationLock& operator=(const OperationLock&) = delete;

  // Takes the lock, waiting for another owner to release it; the owner takes it again at once.
  void lock() {
    const std::uint64_t me = detail::lock_thread_number();
    std::uint64_t w = word_.load(std::memory_order_relaxed);
    if (owner_of(w) == me) {
      reenter(w, /*or_throw=*/true);
      return;
    }
    w = 0;
    if (!word_.compare_exchange_strong(w, held_once_by(me), std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      lock_contended(me);
    }
  }

  // As lock(), without waiting: returns whether the calling thread now holds the lock.
  // Sequentially consistent, as unlock() is: a thread that writes a (sequentially consistent)
  // note and then finds the lock held knows that the holder, reading the note after its release,
  // sees it (DelayedOperation's checks rely on it; on x86 this costs nothing more).
  bool try_lock() {
    const std::uint64_t me = detail::lock_thread_number();
    std::uint64_t w = word_.load(std::memory_order_seq_cst);
    if (owner_of(w) == me) return reenter(w, /*or_throw=*/false);
    if (w != 0) return false;
    return word_.compare_exchange_strong(w, held_once_by(me), std::memory_order_seq_cst,
                                         std::memory_order_seq_cst);
  }

  // Releases one hold; the last one frees the lock. Precondition: held by the calling thread.
  void unlock() noexcept {
    const std::uint64_t w = word_.load(std::memory_order_relaxed);
    if (depth_of(w) > 1) {
      // Read-modify-write: a waiter may be setting kSleepers meanwhile.
      word_.fetch_sub(kOneHold, std::memory_order_relaxed);
      return;
    }
    if ((word_.exchange(0, std::memory_order_seq_cst) & kSleepers) != 0) wake_one();
  }

  // Whether the calling thread holds the lock. Only the owner ever writes a word holding its own
  // number (other threads only add kSleepers to a word they read), so a relaxed load cannot show
  // this thread a stale hold of its own: the answer is exact for the calling thread.
  [[nodiscard]] bool held_by_current_thread() const noexcept {
    return owner_of(word_.load(std::memory_order_relaxed)) == detail::lock_thread_number();
  }

  // How many times the owner holds it. Call only while holding it.
  [[nodiscard]] std::uint32_t depth() const noexcept {
    return depth_of(word_.load(std::memory_order_relaxed));
  }

 private:
  // word_ = (owner's thread number << 16) | (depth << 1) | kSleepers; 0 when free.
  static constexpr std::uint64_t kSleepers = 1;
  static constexpr std::uint64_t kOneHold = 2;
  static constexpr int kOwnerShift = 16;
  static constexpr std::uint64_t owner_of(std::uint64_t w) noexcept { return w >> kOwnerShift; }
  static constexpr std::uint32_t depth_of(std::uint64_t w) noexcept {
    return static_cast<std::uint32_t>((w >> 1) & kMaxDepth);
  }
  static constexpr std::uint64_t held_once_by(std::uint64_t me) noexcept {
    return (me << kOwnerShift) | kOneHold;
  }

  // The owner takes it once more; false (or std::overflow_error) at kMaxDepth.
  bool reenter(std::uint64_t w, bool or_throw);
  void lock_contended(std::uint64_t me) noexcept;
  void wake_one() noexcept;

  std::atomic<std::uint64_t> word_{0};
};

}  // namespace purgatory::detail
