// The top speed: --max-rate finds, for each --impl, the highest arrival rate it sustains on this
// machine. A step is a quiet rate run (mode_rate.hpp) at one rate for --step seconds of arrivals;
// the rate is sustained when every request is resolved exactly once, none early, the arrivals kept
// their schedule (achieved rate within 2% of the target; a step stops issuing at twice its length)
// and the p99 completion lateness is at most --lateness-limit ms (2 by default). The search starts
// at --rate, doubles while steps pass, then bisects between the highest rate that passed and the
// lowest that failed until they are --precision apart (5% by default), up to --max-rate-limit. A
// step that fails is run once more before it counts as failed, since one stall of a noisy 2-core
// machine can spoil a p99. The implementations' searches take turns, one step each, so that a
// slow spell of a shared machine hits them alike. One line per step, then the table:
//
//   purgatory_bench --max-rate --impl=ours,lean,naive,null   (null: what the harness alone reaches)
#pragma once

#include <vector>

#include "config.hpp"
#include "purgatory_under_test.hpp"

namespace purgatory_bench {

// Runs the implementations' searches, a step each in turn; prints the steps and the table. Returns
// 1 when some implementation sustains not even --rate/8, else 0.
int run_max_rate(const Config& config, const std::vector<const Implementation*>& impls);

}  // namespace purgatory_bench
