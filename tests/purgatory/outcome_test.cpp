// outcome.hpp: the outcomes and their names. What each outcome means for the callbacks (on_complete
// for all three, on_expiration only for expired) and "every operation a purgatory accepts ends
// with exactly one" are held by delayed_operation_test.cpp and the race tests of
// delayed_operation_purgatory.hpp in races/ (docs/contracts.md).
#include "purgatory/outcome.hpp"

#include <doctest/doctest.h>

namespace purgatory::test {
namespace {

TEST_CASE("outcome.hpp: to_string() names each outcome, an out-of-range value is \"unknown\"") {
  static_assert(to_string(Outcome::pending) == "pending");  // constexpr
  CHECK(to_string(Outcome::pending) == "pending");
  CHECK(to_string(Outcome::completed) == "completed");
  CHECK(to_string(Outcome::expired) == "expired");
  CHECK(to_string(Outcome::shut_down) == "shut_down");
  CHECK(to_string(static_cast<Outcome>(9)) == "unknown");
  static_assert(sizeof(Outcome) == 1);
  static_assert(Outcome{} == Outcome::pending);  // a value-initialized outcome is not decided
}

}  // namespace
}  // namespace purgatory::test
