#include "mode_rounds.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

namespace purgatory_bench {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Where `name` is in the list, or -1.
int index_of(const std::vector<const Implementation*>& impls, std::string_view name) {
  for (std::size_t i = 0; i < impls.size(); ++i) {
    if (impls[i]->name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

int run_rounds(const Config& config, const std::vector<const Implementation*>& impls) {
  Config run = config;
  run.quiet = true;
  run.csv.clear();
  // per_request[i][round]: implementation i's CPU per request in that round.
  std::vector<std::vector<double>> per_request(impls.size());
  int failed = 0;
  fmt::print(
      "== {} rounds of {}: {} requests/s, latency pct50 {} ms pct75 {} ms, timeout {} ms, "
      "{} keys of {}\n",
      config.rounds, config.impl, config.rate, config.pct50, config.pct75, config.timeout_ms,
      config.keys, config.key_space);
  for (int round = 1; round <= config.rounds; ++round) {
    for (std::size_t i = 0; i < impls.size(); ++i) {
      const Result r = impls[i]->run(run, impls[i]->name, nullptr);
      const bool lost = r.resolved != r.requests;
      if (lost || r.early != 0) failed = 1;
      per_request[i].push_back(r.cpu_per_request_us());
      fmt::print("  round {} {:<5} CPU {:.3f} us/req, p99 lateness {:.2f} ms{}{}\n", round,
                 impls[i]->name, per_request[i].back(), r.lateness_p99_ms,
                 lost ? fmt::format(", LOST {} of {}", r.requests - r.resolved, r.requests) : "",
                 r.early != 0 ? fmt::format(", {} EARLY", r.early) : "");
      std::fflush(stdout);
    }
  }
  const int null = index_of(impls, "null");
  // over_null[i][round]: implementation i's CPU per request minus the harness's in that round.
  std::vector<std::vector<double>> over_null(impls.size());
  for (std::size_t i = 0; i < impls.size(); ++i) {
    if (null >= 0) {
      for (int round = 0; round < config.rounds; ++round) {
        const auto r = static_cast<std::size_t>(round);
        over_null[i].push_back(per_request[i][r] - per_request[static_cast<std::size_t>(null)][r]);
      }
    }
    const auto [lo, hi] = std::minmax_element(per_request[i].begin(), per_request[i].end());
    fmt::print("median CPU per request: {} {:.3f} us (rounds {:.3f} to {:.3f})", impls[i]->name,
               median(per_request[i]), *lo, *hi);
    if (null >= 0 && static_cast<int>(i) != null) {
      fmt::print(", minus the harness {:.3f} us", median(over_null[i]));
    }
    fmt::print("\n");
  }
  const int ours = index_of(impls, "ours");
  const int lean = index_of(impls, "lean");
  if (null >= 0 && ours >= 0 && lean >= 0) {
    std::vector<double> ratios;
    for (int round = 0; round < config.rounds; ++round) {
      const auto r = static_cast<std::size_t>(round);
      ratios.push_back(over_null[static_cast<std::size_t>(ours)][r] /
                       over_null[static_cast<std::size_t>(lean)][r]);
    }
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    fmt::print(
        "median ratio ours/lean over null: {:.2f} (rounds {:.2f} to {:.2f}; ratio of the "
        "medians {:.2f})\n",
        median(ratios), *lo, *hi,
        median(over_null[static_cast<std::size_t>(ours)]) /
            median(over_null[static_cast<std::size_t>(lean)]));
  }
  return failed;
}

}  // namespace purgatory_bench
