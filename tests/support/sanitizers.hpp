// Which sanitizer a test binary is built with, in one place: race tests scale their rounds down
// under one (sanitizers run 5-20x slower), and what a sanitizer's runtime makes impossible is
// skipped, saying so (ThreadSanitizer's runtime owns operator new, so nothing can count it).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define PURGATORY_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PURGATORY_TEST_TSAN 1
#endif
#endif
#if !defined(PURGATORY_TEST_TSAN)
#define PURGATORY_TEST_TSAN 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define PURGATORY_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PURGATORY_TEST_ASAN 1
#endif
#endif
#if !defined(PURGATORY_TEST_ASAN)
#define PURGATORY_TEST_ASAN 0
#endif

namespace purgatory::test {

inline constexpr bool kThreadSanitizer = PURGATORY_TEST_TSAN != 0;
inline constexpr bool kSanitized = PURGATORY_TEST_TSAN != 0 || PURGATORY_TEST_ASAN != 0;

// Seeded rounds for race tests: fewer under a sanitizer.
constexpr int rounds(int release, int sanitized) {
  return kSanitized ? sanitized : release;
}

}  // namespace purgatory::test
