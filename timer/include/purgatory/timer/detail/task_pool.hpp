// detail::pool_allocate / pool_deallocate: the memory of the tasks make_task(callable) builds and
// of DelayedOperations.
//
// A server adds tasks on its request threads and the timer frees them on its executor's thread.
// With glibc's malloc that pattern is slow: every free from the executor thread lands in the
// adding thread's arena, under that arena's lock, and fragments it (measured: about 450 ns of a
// 1M-task burst's CPU per task went to malloc and free, timer_burst); and a burst's fresh memory
// is faulted in 4 KiB at a time (on a VM, about 9 us per fault: a third of that burst's CPU).
//
// Here blocks come from slabs: mappings of one size class (16-byte classes up to kMaxPooled
// bytes), each owned by one thread. The owning thread allocates from its slab's free list and
// fresh space without atomics or locks; a block freed by its owner goes back on that list, one
// freed by any other thread is pushed on the slab's given-back stack (one compare-and-swap), which
// the owner takes whole. A thread's slabs of a class double in size from 64 KiB to 2 MiB, and
// their fresh memory is faulted in 256 KiB at a time with one system call where the system has
// one (Linux's MADV_POPULATE_WRITE).
//
// Memory: a slab whose blocks are all free is released (unmapped; at most two empty 2 MiB slabs are
// kept for reuse) when its owner next looks at its slabs: every 4096 of its allocations of that
// class, and when the thread ends. A thread that ends with blocks still in use leaves their slabs
// to the next thread that needs a slab of that class. So a burst's memory is returned after it
// once the adding thread allocates again or ends; it is reused by the next burst meanwhile.
// Blocks larger than kMaxPooled go straight to the heap. Under AddressSanitizer the pool is off
// (every block goes to the heap), so that a use after free is still reported.
//
// Thread-safe: any thread may allocate and free, including threads that are exiting.
#pragma once

#include <cstddef>

#include "purgatory/timer/export.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define PURGATORY_TASK_POOL_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PURGATORY_TASK_POOL_OFF 1
#endif
#endif

namespace purgatory::detail {

#ifdef PURGATORY_TASK_POOL_OFF
inline constexpr bool kTaskPoolOn = false;
#else
inline constexpr bool kTaskPoolOn = true;
#endif
inline constexpr std::size_t kPoolGranule = 16;
inline constexpr std::size_t kMaxPooled = 512;

// `size` bytes, aligned for any object of at most alignof(std::max_align_t). Throws
// std::bad_alloc.
[[nodiscard]] PURGATORY_TIMER_EXPORT void* pool_allocate(std::size_t size);
// Gives back a block from pool_allocate(size), with the same size.
PURGATORY_TIMER_EXPORT void pool_deallocate(void* block, std::size_t size) noexcept;
// Bytes of slabs mapped now, over all threads (0 when the pool is off). For tests and diagnostics.
[[nodiscard]] PURGATORY_TIMER_EXPORT std::size_t pool_mapped_bytes() noexcept;
// Blocks allocated so far by threads whose own heap had ended (they were exiting), from the shared
// heap that serves them (0 when the pool is off). For tests and diagnostics.
[[nodiscard]] PURGATORY_TIMER_EXPORT std::size_t pool_orphan_allocations() noexcept;

}  // namespace purgatory::detail
