// What every fuzz target does on a broken invariant: say which, then abort(), which libFuzzer
// reports as a crash and saves the input as crash-<sha1> for replay and minimization.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace purgatory::fuzz {

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "fuzz invariant broken: {}\n",
             fmt::format(format, std::forward<Args>(args)...));
  std::fflush(stderr);
  std::abort();
}

template <class... Args>
void check(bool ok, fmt::format_string<Args...> format, Args&&... args) {
  if (!ok) fail(format, std::forward<Args>(args)...);
}

}  // namespace purgatory::fuzz

// UBSan defaults of every fuzz target (UBSAN_OPTIONS overrides them key by key): stop at the
// first report, so libFuzzer saves the input, except for the known bugs listed in
// known_bugs.supp (CMake passes its path). Only checks compiled as recoverable can be suppressed:
// see purgatory_fuzz_recoverable in CMakeLists.txt. Not inline: a strong definition must beat the
// runtime's weak one, so include this header in one translation unit per target.
extern "C" const char* __ubsan_default_options() {
  return "halt_on_error=1:print_stacktrace=1:suppressions=" PURGATORY_FUZZ_UBSAN_SUPPRESSIONS;
}
