// detail::pool_allocate / pool_deallocate: the memory of the tasks make_task(callable) builds.
//
// A server adds tasks on its request threads and the timer frees them on its executor's thread.
// With glibc's malloc that pattern is slow: every free from the executor thread lands in the
// adding thread's arena, under that arena's lock, and fragments it, so that the next malloc there
// sorts freed chunks (measured: about 450 ns of a 1M-task burst's CPU per task went to malloc and
// free, timer_burst). Here each thread keeps its own free lists per size class; a thread that
// frees more than it allocates hands whole batches to a shared depot (one lock per batch), where
// an allocating thread picks them up. Nothing per block is shared between threads.
//
// Memory: blocks come from ::operator new one at a time and go back to ::operator delete when the
// depot is full (kDepotBytes, 4 MiB, per class), so a burst's memory is returned after it and what
// stays cached is bounded. Blocks up to kMaxPooled bytes are pooled; larger ones go straight to the
// heap. Under AddressSanitizer the pool is off (every block goes to the heap), so that a use
// after free is still reported.
//
// Thread-safe: any thread may allocate and free, including threads that are exiting.
#pragma once

#include <cstddef>

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
[[nodiscard]] void* pool_allocate(std::size_t size);
// Gives back a block from pool_allocate(size), with the same size.
void pool_deallocate(void* block, std::size_t size) noexcept;

}  // namespace purgatory::detail
