// The tests' one replacement of the global operator new and delete (every form: plain, array,
// aligned, nothrow), linked into the suites that check memory claims and into the allocation
// sweep. It serves three headers:
//   allocation_counter.hpp      every thread's allocations and live bytes (purgatory memory claims)
//   CountAllocations            the calling thread's allocations (timer_contract_support.hpp)
//   fault_injection.hpp         the k-th allocation of an armed thread fails (the sweep)
// Under ThreadSanitizer, whose runtime defines operator new itself, nothing is replaced: counting
// reports unavailable and only the task pool's refill can be failed (through its hook).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(_WIN32)
#include <malloc.h>
#elif defined(__APPLE__)
#include <malloc/malloc.h>
#else
#include <malloc.h>
#endif
#if defined(__GLIBC__)
#include <execinfo.h>  // PURGATORY_SWEEP_TRACE prints where the k-th allocation was made
#endif

#include "allocation_counter.hpp"
#include "fault_injection.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "sanitizers.hpp"

namespace {

// Per thread, trivially constructed and destroyed: usable inside operator new.
struct ThreadState {
  std::uint64_t allocations = 0;  // every allocation of this thread (CountAllocations)
  bool armed = false;             // the sweep's fault injection
  purgatory::sweep::Mode mode = purgatory::sweep::Mode::transient;
  std::uint64_t fail_at = 0;
  std::uint64_t armed_allocations = 0;
  std::uint64_t injected = 0;
};
thread_local ThreadState t_state;

std::atomic<std::int64_t> g_live{0};
std::atomic<std::uint64_t> g_allocations{0};
std::atomic<std::uint64_t> g_requested{0};

// Counts one allocation of an armed thread; true when it must fail.
[[maybe_unused]] bool fail_this_one() noexcept {
  ThreadState& s = t_state;
  if (!s.armed) return false;
  ++s.armed_allocations;
  const bool fail =
      s.fail_at != 0 &&
      (s.armed_allocations == s.fail_at ||
       (s.mode == purgatory::sweep::Mode::persistent && s.armed_allocations > s.fail_at));
  if (fail) ++s.injected;
#if defined(__GLIBC__)
  if (fail && s.mode == purgatory::sweep::Mode::transient) {
    static const char* want = std::getenv("PURGATORY_SWEEP_TRACE");
    if (want != nullptr && std::strtoull(want, nullptr, 10) == s.fail_at) {
      void* frames[40];
      backtrace_symbols_fd(frames, backtrace(frames, 40), 2);
    }
  }
#endif
  return fail;
}

}  // namespace

namespace purgatory::sweep {

void arm(std::uint64_t fail_at, Mode mode) noexcept {
#if defined(PURGATORY_RACE_HOOKS)
  // Only the hooked copy of the timer has the task pool's hook (purgatory_test_allocations_hooked).
  purgatory::detail::set_allocation_fault_hook(&fail_this_one);
#endif
  t_state.armed = true;
  t_state.mode = mode;
  t_state.fail_at = fail_at;
  t_state.armed_allocations = 0;
  t_state.injected = 0;
}

Counts disarm() noexcept {
  const Counts counts{t_state.armed_allocations, t_state.injected};
  t_state.armed = false;
  return counts;
}

bool persistent_run() noexcept {
  return t_state.mode == Mode::persistent;
}

Unarmed::Unarmed() noexcept : was_armed_(t_state.armed) {
  t_state.armed = false;
}

Unarmed::~Unarmed() {
  t_state.armed = was_armed_;
}

bool operator_new_failed() noexcept {
  return !test::kThreadSanitizer;
}

}  // namespace purgatory::sweep

namespace purgatory::contract {

bool counting_allocations() noexcept {
  return !test::kThreadSanitizer;
}

AllocationCounts allocation_counts() noexcept {
  return {g_live.load(), g_allocations.load(), g_requested.load()};
}

CountAllocations::CountAllocations() : start_(t_state.allocations) {}
CountAllocations::~CountAllocations() = default;
std::uint64_t CountAllocations::count() const {
  return t_state.allocations - start_;
}

}  // namespace purgatory::contract

#if !PURGATORY_TEST_TSAN

namespace {

#if defined(_WIN32)
// The Windows C runtime (msvcrt) has neither aligned_alloc() nor _aligned_msize(), so an aligned
// block is a malloc() block over-allocated by the alignment, with the pointer malloc() returned
// stored just before the aligned address: its size is then _msize() of that pointer.
void* malloc_aligned(std::size_t size, std::size_t align) noexcept {
  if (align < alignof(void*)) align = alignof(void*);
  if (size > SIZE_MAX - align - sizeof(void*)) return nullptr;
  void* raw = std::malloc(size + align + sizeof(void*));
  if (raw == nullptr) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw) + sizeof(void*);
  const auto aligned = (start + align - 1) & ~(std::uintptr_t{align} - 1);
  reinterpret_cast<void**>(aligned)[-1] = raw;
  return reinterpret_cast<void*>(aligned);
}
void* malloc_block(void* aligned) noexcept {
  return static_cast<void**>(aligned)[-1];
}
#endif

// What malloc really handed out for `p` (at least what was asked).
std::size_t usable_size(void* p, std::size_t align) noexcept {
#if defined(_WIN32)
  return ::_msize(align == 0 ? p : malloc_block(p));
#elif defined(__APPLE__)
  (void)align;
  return ::malloc_size(p);
#else
  (void)align;
  return ::malloc_usable_size(p);
#endif
}

void* counted(void* p, std::size_t size, std::size_t align) noexcept {
  if (p == nullptr) return nullptr;
  ++t_state.allocations;
  g_live.fetch_add(static_cast<std::int64_t>(usable_size(p, align)), std::memory_order_relaxed);
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  g_requested.fetch_add(size, std::memory_order_relaxed);
  return p;
}

void* try_allocate(std::size_t size) noexcept {
  if (fail_this_one()) return nullptr;
  return counted(std::malloc(size == 0 ? 1 : size), size, 0);
}

void* try_allocate_aligned(std::size_t size, std::align_val_t align) noexcept {
  if (fail_this_one()) return nullptr;
  const auto a = static_cast<std::size_t>(align);
#if defined(_WIN32)
  return counted(malloc_aligned(size == 0 ? 1 : size, a), size, a);
#else
  return counted(std::aligned_alloc(a, (size + a - 1) / a * a), size, a);
#endif
}

void release(void* p) noexcept {
  if (p == nullptr) return;
  g_live.fetch_sub(static_cast<std::int64_t>(usable_size(p, 0)), std::memory_order_relaxed);
  std::free(p);
}

void release_aligned(void* p, std::align_val_t align) noexcept {
  if (p == nullptr) return;
  const auto a = static_cast<std::size_t>(align);
  g_live.fetch_sub(static_cast<std::int64_t>(usable_size(p, a)), std::memory_order_relaxed);
#if defined(_WIN32)
  std::free(malloc_block(p));
#else
  std::free(p);
#endif
}

void* allocate(std::size_t size) {
  if (void* p = try_allocate(size)) return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t size, std::align_val_t align) {
  if (void* p = try_allocate_aligned(size, align)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) {
  return allocate(size);
}
void* operator new[](std::size_t size) {
  return allocate(size);
}
void* operator new(std::size_t size, std::align_val_t align) {
  return allocate_aligned(size, align);
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return allocate_aligned(size, align);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return try_allocate(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return try_allocate(size);
}
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return try_allocate_aligned(size, align);
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return try_allocate_aligned(size, align);
}
void operator delete(void* p) noexcept {
  release(p);
}
void operator delete[](void* p) noexcept {
  release(p);
}
void operator delete(void* p, std::size_t) noexcept {
  release(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete(void* p, std::align_val_t align) noexcept {
  release_aligned(p, align);
}
void operator delete[](void* p, std::align_val_t align) noexcept {
  release_aligned(p, align);
}
void operator delete(void* p, std::size_t, std::align_val_t align) noexcept {
  release_aligned(p, align);
}
void operator delete[](void* p, std::size_t, std::align_val_t align) noexcept {
  release_aligned(p, align);
}
void operator delete(void* p, std::align_val_t align, const std::nothrow_t&) noexcept {
  release_aligned(p, align);
}
void operator delete[](void* p, std::align_val_t align, const std::nothrow_t&) noexcept {
  release_aligned(p, align);
}

#endif  // !PURGATORY_TEST_TSAN
