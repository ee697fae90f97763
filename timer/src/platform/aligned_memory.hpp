// Internal (platform layer): aligned memory straight from the operating system, for the task pool's
// slabs (task_pool.cpp finds a block's slab by masking the block's address, so every slab must
// start at a multiple of a large alignment).
//
// POSIX: mmap, with the unaligned head and tail of an over-sized mapping given back at once.
// Windows: VirtualAlloc, which cannot give back part of a reservation: an over-sized reservation
// finds an aligned address, is released, and that address is reserved again (retried if another
// thread took it meanwhile). Elsewhere: the aligned global operator new.
#pragma once

#include <cstddef>

namespace purgatory::platform {

// `bytes` (a multiple of 64 KiB) of readable and writable memory starting at a multiple of
// `alignment` (a power of two, at least 64 KiB), or null when the system has none to give.
// Thread-safe.
[[nodiscard]] void* reserve_aligned(std::size_t bytes, std::size_t alignment) noexcept;

// Gives back memory from reserve_aligned(bytes, alignment), with the same arguments. Thread-safe.
void release_aligned(void* p, std::size_t bytes, std::size_t alignment) noexcept;

// A hint: the caller is about to write the `bytes` at `p` (inside memory from reserve_aligned()),
// so fault them in now, in one system call, rather than one page fault at a time. Does nothing
// where the system has no such call (Linux before 5.14, other systems). Thread-safe.
void prepare_for_write(void* p, std::size_t bytes) noexcept;

}  // namespace purgatory::platform
