// purgatory/version.hpp: the headers' version (macros, kHeaderVersion) and the library's
// (version(), compiled into libpurgatory_timer) agree, and both are the project's.
#include "purgatory/version.hpp"

#include <string>

#include <doctest/doctest.h>

TEST_CASE("version: the library's version() equals the headers' PURGATORY_VERSION_* macros") {
  const purgatory::Version v = purgatory::version();
  CHECK(v.major == PURGATORY_VERSION_MAJOR);
  CHECK(v.minor == PURGATORY_VERSION_MINOR);
  CHECK(v.patch == PURGATORY_VERSION_PATCH);
  CHECK(v == purgatory::kHeaderVersion);
  CHECK(PURGATORY_VERSION ==
        PURGATORY_VERSION_MAJOR * 10000 + PURGATORY_VERSION_MINOR * 100 + PURGATORY_VERSION_PATCH);
  CHECK(std::string(PURGATORY_VERSION_STRING) ==
        std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch));
}

TEST_CASE("version: the headers are the project's version, as CMake's project() declares it") {
  // PURGATORY_PROJECT_VERSION comes from tests/timer/CMakeLists.txt (${PROJECT_VERSION}).
  CHECK(std::string(PURGATORY_VERSION_STRING) == PURGATORY_PROJECT_VERSION);
}

TEST_CASE("version: versions order by major, then minor, then patch") {
  using purgatory::Version;
  CHECK(Version{0, 1, 9} < Version{0, 2, 0});
  CHECK(Version{0, 9, 9} < Version{1, 0, 0});
  CHECK(Version{1, 2, 3} < Version{1, 2, 4});
  CHECK(Version{1, 2, 3} == Version{1, 2, 3});
}
