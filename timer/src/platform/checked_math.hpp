// Internal (platform layer): integer arithmetic that reports overflow instead of wrapping (signed
// overflow is undefined behaviour). The compiler's builtin where it has one (one multiply and a
// flag test), portable C++ otherwise.
#pragma once

#include <cstdint>
#include <limits>

namespace purgatory::platform {

// Stores a * b in `product` and returns true, or returns false (`product` unspecified) when the
// product does not fit in int64_t.
[[nodiscard]] inline bool multiply_checked(std::int64_t a, std::int64_t b,
                                           std::int64_t& product) noexcept {
#if defined(__has_builtin)
#if __has_builtin(__builtin_mul_overflow)
#define PURGATORY_HAVE_BUILTIN_MUL_OVERFLOW 1
#endif
#endif
#if defined(PURGATORY_HAVE_BUILTIN_MUL_OVERFLOW)
  return !__builtin_mul_overflow(a, b, &product);
#else
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const bool overflows = a > 0 ? (b > 0 ? a > kMax / b : b < kMin / a)
                               : (b > 0 ? a < kMin / b : a != 0 && b < kMax / a);
  if (overflows) return false;
  product = a * b;
  return true;
#endif
}

}  // namespace purgatory::platform
