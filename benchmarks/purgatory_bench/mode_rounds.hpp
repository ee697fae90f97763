// Rounds: --rounds N runs the --impl list N times over, one implementation after the other, each
// run a quiet rate run (mode_rate.hpp), so that a slow spell of a shared machine falls on all of
// them alike. One line per run, then per implementation the median CPU per request over its rounds
// and, with null in the list, the median of each round's CPU per request minus that round's
// harness (null's); with ours and lean both there, the median of the rounds' ratios
// (ours - null) / (lean - null), each ratio from runs a few seconds apart:
//
//   purgatory_bench --rounds 5 --impl=ours,lean,null --rate 100000 --duration 5
#pragma once

#include <vector>

#include "config.hpp"
#include "purgatory_under_test.hpp"

namespace purgatory_bench {

// Returns 1 when some run lost a request or completed one early, else 0.
int run_rounds(const Config& config, const std::vector<const Implementation*>& impls);

}  // namespace purgatory_bench
