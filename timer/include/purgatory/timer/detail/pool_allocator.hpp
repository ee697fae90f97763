// detail::PoolAllocator<T>: a standard allocator whose single objects come from the task pool
// (task_pool.hpp), for node-based containers the library fills on one thread and empties on
// another: a purgatory's key entries are made by the watching thread and freed by the completing
// one, the pattern glibc's malloc handles worst. Arrays (n > 1), objects larger than kMaxPooled
// and over-aligned ones go to the global operator new.
//
// Stateless: every instance is equal to every other (memory from one is freed by any).
// Thread-safe, as the pool is.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

#include "purgatory/timer/detail/task_pool.hpp"

namespace purgatory::detail {

template <class T>
class PoolAllocator {
 public:
  using value_type = T;

  PoolAllocator() noexcept = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly

  [[nodiscard]] T* allocate(std::size_t n) {
    if (n == 1 && pooled()) return static_cast<T*>(pool_allocate(sizeof(T)));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1 && pooled()) {
      pool_deallocate(p, sizeof(T));
      return;
    }
    std::allocator<T>().deallocate(p, n);
  }

  template <class U>
  friend bool operator==(const PoolAllocator&, const PoolAllocator<U>&) noexcept {
    return true;
  }

 private:
  static constexpr bool pooled() noexcept {
    return sizeof(T) <= kMaxPooled && alignof(T) <= alignof(std::max_align_t);
  }
};

}  // namespace purgatory::detail
