// Internal: the lock of a timer base and of a purgatory shard.
//
// Their critical sections are a handful of pointer writes (link or unlink a task or a watch node,
// copy a key's list), taken by request threads and completing threads at once. A plain std::mutex
// puts a thread that finds it held to sleep in the kernel, which costs far more than the section it
// waits for; glibc's adaptive mutex spins briefly first and sleeps only if the holder stays (e.g.
// was preempted). Elsewhere, std::mutex.
#pragma once

#include <mutex>

#if defined(__GLIBC__)
#include <pthread.h>
#endif

namespace purgatory::detail {

#if defined(__GLIBC__) && defined(PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP)
// Thread-safe; Lockable. Not recursive.
class AdaptiveMutex {
 public:
  AdaptiveMutex() = default;
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;
  ~AdaptiveMutex() { pthread_mutex_destroy(&mu_); }

  void lock() noexcept { (void)pthread_mutex_lock(&mu_); }
  bool try_lock() noexcept { return pthread_mutex_trylock(&mu_) == 0; }
  void unlock() noexcept { (void)pthread_mutex_unlock(&mu_); }

 private:
  pthread_mutex_t mu_ = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
};
#else
using AdaptiveMutex = std::mutex;
#endif

}  // namespace purgatory::detail
