// The global operator new of the sweep binary, and the task pool's fault hook: see
// fault_injection.hpp.
#include "fault_injection.hpp"

#include <cstddef>
#include <cstdlib>
#if defined(_WIN32)
#include <malloc.h>
#endif
#include <new>

#if defined(__GLIBC__)
#include <execinfo.h>  // PURGATORY_SWEEP_TRACE prints where the k-th allocation was made
#endif

#include "purgatory/timer/detail/race_point.hpp"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PURGATORY_SWEEP_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(PURGATORY_SWEEP_TSAN)
#define PURGATORY_SWEEP_TSAN 1
#endif

namespace purgatory::sweep {
namespace {

struct State {
  bool armed = false;
  Mode mode = Mode::transient;
  std::uint64_t fail_at = 0;
  std::uint64_t allocations = 0;
  std::uint64_t injected = 0;
};
thread_local State t_state;  // trivially constructed and destroyed: usable inside operator new

// Counts one allocation of an armed thread; true when it must fail.
bool fail_this_one() noexcept {
  State& s = t_state;
  if (!s.armed) return false;
  ++s.allocations;
  const bool fail = s.fail_at != 0 && (s.allocations == s.fail_at ||
                                       (s.mode == Mode::persistent && s.allocations > s.fail_at));
  if (fail) ++s.injected;
#if defined(__GLIBC__)
  if (fail && s.mode == Mode::transient) {
    static const char* want = std::getenv("PURGATORY_SWEEP_TRACE");
    if (want != nullptr && std::strtoull(want, nullptr, 10) == s.fail_at) {
      void* frames[40];
      const int n = backtrace(frames, 40);
      backtrace_symbols_fd(frames, n, 2);
    }
  }
#endif
  return fail;
}

}  // namespace

void arm(std::uint64_t fail_at, Mode mode) noexcept {
  purgatory::detail::set_allocation_fault_hook(&fail_this_one);
  t_state = State{true, mode, fail_at, 0, 0};
}

Counts disarm() noexcept {
  const Counts counts{t_state.allocations, t_state.injected};
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

#if defined(PURGATORY_SWEEP_TSAN)
bool operator_new_failed() noexcept {
  return false;
}
#else
bool operator_new_failed() noexcept {
  return true;
}
#endif

}  // namespace purgatory::sweep

#if !defined(PURGATORY_SWEEP_TSAN)

namespace {

void* allocate(std::size_t size) {
  if (purgatory::sweep::fail_this_one()) throw std::bad_alloc();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t size, std::align_val_t align) {
  if (purgatory::sweep::fail_this_one()) throw std::bad_alloc();
  const auto a = static_cast<std::size_t>(align);
#if defined(_WIN32)
  // No aligned_alloc() in the Windows C runtime; its aligned blocks go back with _aligned_free().
  if (void* p = _aligned_malloc(size == 0 ? 1 : size, a)) return p;
#else
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
#endif
  throw std::bad_alloc();
}

void free_aligned(void* p) noexcept {
#if defined(_WIN32)
  _aligned_free(p);
#else
  std::free(p);
#endif
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
  if (purgatory::sweep::fail_this_one()) return nullptr;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  if (purgatory::sweep::fail_this_one()) return nullptr;
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
void operator delete(void* p, std::align_val_t) noexcept {
  free_aligned(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  free_aligned(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  free_aligned(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  free_aligned(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

#endif
