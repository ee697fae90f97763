// Internal: the only public header that names a platform. Three things stay inline in headers
// for speed and depend on the compiler, the C library or the standard library; everything else
// platform-specific lives in the timer's sources (timer/src/platform/), behind plain functions.
//
// - AdaptiveMutex: the lock of a timer base and of a purgatory shard. Their critical sections are a
//   handful of pointer writes (link or unlink a task or a watch node, copy a key's list), taken by
//   request threads and completing threads at once. A plain std::mutex puts a thread that finds it
//   held to sleep in the kernel, which costs far more than the section it waits for; glibc's
//   adaptive mutex spins briefly first and sleeps only if the holder stays (e.g. was preempted).
//   Elsewhere, std::mutex.
// - prefetch_for_write(): a hint to start loading a cache line the caller is about to write
//   (expiring a bucket, taking a pool block, a purgatory's batched key lookups). A compiler
//   builtin where the compiler has one, else nothing.
// - kSlowHash<Hash>: whether libstdc++'s unordered_map stores each entry's hash beside it (it does
//   for a hash it deems slow, such as std::hash<std::string>, or one that may throw). The
//   purgatory's key map wraps the user's Hash and keeps the layout Hash itself would get. Other
//   standard libraries never store it: false.
#pragma once

#include <functional>
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

// Starts loading the line holding `p` with the intent to write (PREFETCHW where the target CPU has
// it, a plain prefetch otherwise; on this project's benchmarks the two measured the same), so that
// a later store or locked instruction waits less for another core to give the line up. Never
// faults: `p` may be null, stale or dangling.
inline void prefetch_for_write([[maybe_unused]] const void* p) noexcept {
#if defined(__has_builtin)
#if __has_builtin(__builtin_prefetch)
  __builtin_prefetch(p, 1);
#endif
#endif
}

#if defined(__GLIBCXX__)
template <class Hash>
inline constexpr bool kSlowHash = !std::__is_fast_hash<Hash>::value;
#else
template <class Hash>
inline constexpr bool kSlowHash = false;
#endif

}  // namespace purgatory::detail
