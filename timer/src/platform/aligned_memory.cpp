#include "aligned_memory.hpp"

#include <cstdint>
#include <new>

#if defined(_WIN32)
#include <windows.h>
#elif __has_include(<sys/mman.h>)
#include <sys/mman.h>
#define PURGATORY_HAVE_MMAP 1
#endif

namespace purgatory::platform {
namespace {

std::uintptr_t align_up(std::uintptr_t at, std::size_t alignment) noexcept {
  return (at + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
}

}  // namespace

#if defined(_WIN32)

void* reserve_aligned(std::size_t bytes, std::size_t alignment) noexcept {
  // Another thread may map the address found between the release and the second reservation;
  // then look again. A few tries are plenty in practice.
  for (int attempt = 0; attempt < 16; ++attempt) {
    void* probe = ::VirtualAlloc(nullptr, bytes + alignment, MEM_RESERVE, PAGE_NOACCESS);
    if (probe == nullptr) return nullptr;
    const std::uintptr_t start = align_up(reinterpret_cast<std::uintptr_t>(probe), alignment);
    (void)::VirtualFree(probe, 0, MEM_RELEASE);
    void* p = ::VirtualAlloc(reinterpret_cast<void*>(start), bytes, MEM_RESERVE | MEM_COMMIT,
                             PAGE_READWRITE);
    if (p != nullptr) return p;
  }
  return nullptr;
}

void release_aligned(void* p, std::size_t /*bytes*/, std::size_t /*alignment*/) noexcept {
  (void)::VirtualFree(p, 0, MEM_RELEASE);
}

void prepare_for_write(void* /*p*/, std::size_t /*bytes*/) noexcept {}

#elif defined(PURGATORY_HAVE_MMAP)

void* reserve_aligned(std::size_t bytes, std::size_t alignment) noexcept {
  // Map enough to find an aligned start, then give back what lies outside [start, start + bytes).
  const std::size_t reserve = bytes + alignment;
  void* p = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t start = align_up(base, alignment);
  if (start > base) ::munmap(p, start - base);
  if (const std::uintptr_t end = base + reserve; end > start + bytes) {
    ::munmap(reinterpret_cast<void*>(start + bytes), end - (start + bytes));
  }
  return reinterpret_cast<void*>(start);
}

void release_aligned(void* p, std::size_t bytes, std::size_t /*alignment*/) noexcept {
  ::munmap(p, bytes);
}

void prepare_for_write([[maybe_unused]] void* p, [[maybe_unused]] std::size_t bytes) noexcept {
#if defined(MADV_POPULATE_WRITE)
  // Fails (and then the pages fault in one by one as usual) on kernels before 5.14.
  (void)::madvise(p, bytes, MADV_POPULATE_WRITE);
#endif
}

#else

void* reserve_aligned(std::size_t bytes, std::size_t alignment) noexcept {
  return ::operator new (bytes, std::align_val_t{alignment}, std::nothrow);
}

void release_aligned(void* p, std::size_t /*bytes*/, std::size_t alignment) noexcept {
  ::operator delete (p, std::align_val_t{alignment});
}

void prepare_for_write(void* /*p*/, std::size_t /*bytes*/) noexcept {}

#endif

}  // namespace purgatory::platform
