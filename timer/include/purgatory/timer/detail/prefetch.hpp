// Internal: a hint to start loading a cache line the caller is about to write.
#pragma once

namespace purgatory::detail {

// Asks for the line holding `p` in a state that allows writing (x86 PREFETCHW, a no-op on CPUs
// without it), so that a later store or locked instruction does not wait for another core to give
// the line up. Never faults: `p` may be stale or dangling.
inline void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw (%0)" : : "r"(p));
#else
  __builtin_prefetch(p, 1);
#endif
}

}  // namespace purgatory::detail
