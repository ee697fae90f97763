// Counts the allocations of each thread, so a test can check that a call allocates nothing
// (timer_contract_support.hpp), by replacing the global operator new. Not under
// ThreadSanitizer, whose runtime defines operator new itself (and whose malloc hook also runs
// where thread-local storage cannot be read): there CountAllocations::available() is false.
#include <cstdint>
#include <cstdlib>
#include <new>

#include "timer_contract_support.hpp"

namespace {
thread_local std::uint64_t t_allocations = 0;
}  // namespace

#if !PURGATORY_TEST_TSAN

namespace {
void* allocate(std::size_t size) {
  ++t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
}  // namespace
void* operator new(std::size_t size) {
  return allocate(size);
}
void* operator new[](std::size_t size) {
  return allocate(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  ++t_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  ++t_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

#endif

namespace purgatory::contract {

CountAllocations::CountAllocations() : start_(t_allocations) {}
CountAllocations::~CountAllocations() = default;
std::uint64_t CountAllocations::count() const {
  return t_allocations - start_;
}

}  // namespace purgatory::contract
