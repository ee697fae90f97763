/// @file
/// OperationLock: the per-operation lock of a DelayedOperation.
///
/// A re-entrant mutex that knows its owner. Re-entrant because Kafka's idiom runs user code under
/// it that may legitimately re-enter (try_complete() calling force_complete() on its own operation,
/// a thread that holds the lock checking a key that watches the operation). Knowing the owner lets
/// DelayedOperation tell "a completion decided inside try_complete()" (whose callbacks must wait
/// until the lock is released) from one decided by an outside thread.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <mutex>
#include <thread>

namespace purgatory {

/// A re-entrant mutex that knows its owner (see the file's overview).
/// Thread-safe. Lockable (lock/try_lock/unlock); the owner may lock again, and must unlock as
/// often.
class OperationLock {
 public:
  OperationLock() = default;
  OperationLock(const OperationLock&) = delete;
  OperationLock& operator=(const OperationLock&) = delete;

  /// Takes the lock, waiting for another owner to release it; the owner takes it again at once.
  void lock() {
    if (held_by_current_thread()) {
      ++depth_;
      return;
    }
    mu_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    depth_ = 1;
  }

  /// As lock(), without waiting: returns whether the calling thread now holds the lock.
  bool try_lock() {
    if (held_by_current_thread()) {
      ++depth_;
      return true;
    }
    if (!mu_.try_lock()) return false;
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    depth_ = 1;
    return true;
  }

  /// Releases one hold; the last one frees the lock. Only the owner may call it.
  void unlock() {
    assert(held_by_current_thread());
    if (--depth_ > 0) return;
    owner_.store(std::thread::id{}, std::memory_order_relaxed);
    mu_.unlock();
  }

  /// Only the owner ever stores its own id, so a relaxed load cannot show this thread a stale id
  /// of its own: the answer is exact for the calling thread.
  [[nodiscard]] bool held_by_current_thread() const noexcept {
    return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }

  /// How many times the owner holds it. Call only while holding it.
  [[nodiscard]] std::uint32_t depth() const noexcept { return depth_; }

 private:
  std::mutex mu_;
  std::atomic<std::thread::id> owner_{};
  std::uint32_t depth_ = 0;  // guarded by mu_
};

}  // namespace purgatory
