// The soak: --duration S runs the rate run at --rate for S seconds instead of --num requests, then
// prints a summary (RSS after the warm-up, the first sample at or after min(60 s, 10% of S),
// against RSS at the end of the arrivals; the purgatory's size; every request resolved exactly
// once) and `soak: PASS` or `soak: FAIL (reason)`, exiting 1 on failure: when a request is not
// resolved exactly once, one completes early, the backlog does not drain within 60 s, or RSS at
// the end exceeds RSS after the warm-up by more than 10% + 1 MiB. `--soak` is the preset for the
// reliability figures:
//
//   purgatory_bench --soak    (= --impl=ours --duration 600 --rate 100000 --sample 10, with the
//                              default latency mix; any of these given explicitly wins)
//
// --csv FILE also writes the samples as time_s,arrived,resolved,pending,rss_mib,watched,impl
// (pending is the purgatory's delayed operations, watched its watch-list entries).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "config.hpp"
#include "run_result.hpp"

namespace purgatory_bench {

// A soak fails when RSS at the end of the arrivals exceeds RSS after the warm-up by more than this.
constexpr double kRssGrowthLimit = 0.10;
constexpr double kRssSlackMiB = 1.0;
// A soak's backlog must drain within this after the last arrival.
constexpr auto kDrainLimit = std::chrono::seconds(60);

// Prints one run's soak summary; returns the reasons it fails, "" if it passes.
std::string soak_summary(const Config& config, const std::vector<Sample>& samples,
                         const RunEnd& end, const Result& result);

// Prints the verdict over every implementation run; returns whether the soak failed.
bool print_soak_verdict(const Results& results);

}  // namespace purgatory_bench
