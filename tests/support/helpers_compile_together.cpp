// Every test helper header in one translation unit: two helpers that define the same name in one
// namespace (as timer_test_support.hpp and purgatory_test_support.hpp once both defined
// purgatory::test::ManualTimer, differently) fail to compile here, instead of breaking the one
// definition rule in the suites that link both (in an unoptimised build such a suite crashed or
// hung). Built into contract_regression_tests, which links both halves.
#include "../contracts/contract_support.hpp"
#include "../contracts/purgatory/allocation_counter.hpp"
#include "../contracts/purgatory/purgatory_contract_support.hpp"
#include "../contracts/timer/timer_contract_support.hpp"
#include "../purgatory/purgatory_test_support.hpp"
#include "../timer/timer_test_support.hpp"
#include "race_schedule.hpp"
