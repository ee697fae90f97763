#include "allocation_counter.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__APPLE__)
#include <malloc/malloc.h>
#else
#include <malloc.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define PURGATORY_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PURGATORY_COUNT_ALLOCATIONS 0
#endif
#endif
#if !defined(PURGATORY_COUNT_ALLOCATIONS)
#define PURGATORY_COUNT_ALLOCATIONS 1
#endif

#if PURGATORY_COUNT_ALLOCATIONS

namespace purgatory::contract {
namespace {

// What malloc really handed out for `p` (at least what was asked).
std::size_t usable_size(void* p) noexcept {
#if defined(_WIN32)
  return ::_msize(p);
#elif defined(__APPLE__)
  return ::malloc_size(p);
#else
  return ::malloc_usable_size(p);
#endif
}

std::atomic<std::int64_t> g_live{0};
std::atomic<std::uint64_t> g_allocations{0};
std::atomic<std::uint64_t> g_requested{0};

void* counted_alloc(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) return nullptr;
  g_live.fetch_add(static_cast<std::int64_t>(usable_size(p)), std::memory_order_relaxed);
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  g_requested.fetch_add(size, std::memory_order_relaxed);
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  g_live.fetch_sub(static_cast<std::int64_t>(usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
}  // namespace

bool counting_allocations() noexcept {
  return true;
}

AllocationCounts allocation_counts() noexcept {
  return {g_live.load(), g_allocations.load(), g_requested.load()};
}

}  // namespace purgatory::contract

void* operator new(std::size_t size) {
  void* p = purgatory::contract::counted_alloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t size) {
  return ::operator new(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return purgatory::contract::counted_alloc(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return purgatory::contract::counted_alloc(size);
}
void operator delete(void* p) noexcept {
  purgatory::contract::counted_free(p);
}
void operator delete[](void* p) noexcept {
  purgatory::contract::counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  purgatory::contract::counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  purgatory::contract::counted_free(p);
}

#else  // ThreadSanitizer: its runtime owns operator new

namespace purgatory::contract {

bool counting_allocations() noexcept {
  return false;
}

AllocationCounts allocation_counts() noexcept {
  return {};
}

}  // namespace purgatory::contract

#endif
