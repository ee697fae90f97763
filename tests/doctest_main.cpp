// The doctest main shared by every suite. Besides doctest's own options it takes
// --timer-concurrency=single_thread|thread_safe (test_run_mode.hpp), which doctest ignores.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string_view>

#include "test_run_mode.hpp"

int main(int argc, char** argv) {
  constexpr std::string_view kOption = "--timer-concurrency=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (!arg.starts_with(kOption)) continue;
    const std::string_view mode = arg.substr(kOption.size());
    if (mode != "single_thread" && mode != "thread_safe") {
      std::fprintf(stderr,
                   "%s: --timer-concurrency takes single_thread or thread_safe, not '%.*s'\n",
                   argv[0], static_cast<int>(mode.size()), mode.data());
      return 2;
    }
    purgatory::test::single_thread_run() = mode == "single_thread";
  }
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
