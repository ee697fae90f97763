// Internal: detail::pool_allocate / pool_deallocate, the memory of the tasks make_task(callable)
// builds and of DelayedOperations: per-thread slabs of 16-byte size classes up to kMaxPooled
// bytes, so that a task made on a request thread and freed on the executor's costs neither a
// malloc arena's lock nor a page fault per block (docs/design.md, "The task pool"). Off under
// AddressSanitizer, so that a use after free is still reported.
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
