#include "mode_max_rate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "mode_soak.hpp"

namespace purgatory_bench {
namespace {

// The arrivals kept their schedule when the achieved rate is at least this share of the target.
constexpr double kScheduleKept = 0.98;

struct Step {
  double rate = 0;
  Result result;
  std::string failure;  // why the rate is not sustained; empty when it is
};

// Why a step's run does not sustain its rate, or "".
std::string failure_of(const Config& config, double rate, const Result& r) {
  if (!r.drained) {
    return fmt::format("backlog not drained {} s after the last arrival", kDrainLimit.count());
  }
  if (r.resolved != r.requests) {
    return fmt::format("exactly-once broken: {} resolved of {}", r.resolved, r.requests);
  }
  if (r.early != 0) return fmt::format("{} completed early", r.early);
  if (r.achieved_rate < kScheduleKept * rate) {
    return fmt::format("arrivals behind schedule ({:.0f}/s)", r.achieved_rate);
  }
  if (r.lateness_p99_ms > config.lateness_limit_ms) {
    return fmt::format("p99 lateness {:.2f} ms", r.lateness_p99_ms);
  }
  return "";
}

// One step: a quiet rate run at `rate`, judged and printed on one line.
Step run_step(const Implementation& impl, const Config& config, double rate, int attempt) {
  Config step = config;
  step.rate = rate;
  step.duration_s = config.step_s;
  step.quiet = true;
  step.give_up_s = 2 * config.step_s;
  step.csv.clear();
  Step s{rate, impl.run(step, impl.name, nullptr), ""};
  s.failure = failure_of(config, rate, s.result);
  fmt::print(
      "  {:<5} {:>9.0f}/s{}: p99 lateness {:6.2f} ms, expiry p99 {:6.1f} ms, CPU {:.3f} us/req "
      "({:.0f}% of a core) -> {}\n",
      impl.name, rate, attempt > 0 ? " again" : "", s.result.lateness_p99_ms,
      s.result.expiry_p99_ms, s.result.cpu_per_request_us(),
      100.0 * s.result.cpu_s / s.result.elapsed_s, s.failure.empty() ? "sustained" : s.failure);
  std::fflush(stdout);
  return s;
}

// A failed step is run once more: it counts as failed only when both fail.
Step try_rate(const Implementation& impl, const Config& config, double rate) {
  Step s = run_step(impl, config, rate, 0);
  if (s.failure.empty()) return s;
  Step again = run_step(impl, config, rate, 1);
  return again.failure.empty() ? again : s;
}

double rounded(double rate) {
  return std::max(1000.0, std::round(rate / 1000.0) * 1000.0);
}

// One implementation's search: doubles from --rate while steps pass, halves while none has,
// then bisects.
struct Found {
  const Implementation* impl = nullptr;
  const char* name = "";
  Step best;                                            // rate 0: no step passed
  double hi = std::numeric_limits<double>::infinity();  // the lowest rate that failed
  double next = 0;                                      // the next rate to try; 0: done
  bool at_limit = false;
  int steps = 0;

  // Takes a step's verdict and sets the next rate (0 when the search is over).
  void record(Step s, const Config& config) {
    const double rate = s.rate;
    ++steps;
    if (s.failure.empty()) {
      best = std::move(s);
    } else {
      hi = rate;
    }
    const double lo = best.rate;
    next = 0;
    if (hi == std::numeric_limits<double>::infinity()) {
      if (rate >= config.max_rate_limit) {
        at_limit = true;
      } else {
        next = std::min(rounded(rate * 2), config.max_rate_limit);
      }
    } else if (lo == 0) {
      if (rate / 2 >= config.rate / 8) next = rounded(rate / 2);
    } else {
      const double mid = rounded((lo + hi) / 2);
      if (hi - lo > config.precision * lo && mid > lo && mid < hi) next = mid;
    }
  }
};

void print_table(const Config& config, const std::vector<Found>& all) {
  fmt::print(
      "max rate: the highest arrival rate with p99 completion lateness <= {:g} ms and nothing "
      "lost ({:g} s steps, to {:g}%; {} ms pct50, {} ms pct75, {} ms timeout, {} keys of {})\n",
      config.lateness_limit_ms, config.step_s, 100 * config.precision, config.pct50, config.pct75,
      config.timeout_ms, config.keys, config.key_space);
  fmt::print("  {:<5} {:>12} {:>16} {:>16} {:>13} {:>6}\n", "impl", "max rate/s", "p99 lateness ms",
             "CPU us/request", "% of a core", "steps");
  for (const Found& f : all) {
    if (f.best.rate == 0) {
      fmt::print("  {:<5} {:>12} {:>16} {:>16} {:>13} {:>6}\n", f.name,
                 fmt::format("< {:.0f}", config.rate / 8), "-", "-", "-", f.steps);
      continue;
    }
    const Result& r = f.best.result;
    fmt::print("  {:<5} {:>12} {:>16.2f} {:>16.3f} {:>13.0f} {:>6}\n", f.name,
               fmt::format("{}{:.0f}", f.at_limit ? ">= " : "", f.best.rate), r.lateness_p99_ms,
               r.cpu_per_request_us(), 100.0 * r.cpu_s / r.elapsed_s, f.steps);
  }
  const auto rate_of = [&](const char* name) {
    for (const Found& f : all) {
      if (std::string(f.name) == name) return f.best.rate;
    }
    return 0.0;
  };
  const double ours = rate_of("ours");
  for (const char* other : {"lean", "naive"}) {
    if (ours > 0 && rate_of(other) > 0) {
      fmt::print("max rate ours/{}: {:.2f}\n", other, ours / rate_of(other));
    }
  }
}

}  // namespace

int run_max_rate(const Config& config, const std::vector<const Implementation*>& impls) {
  // The searches take turns, a step each, so that a machine that slows down for a while (as a
  // shared VM does) slows every implementation's search alike, and their ratio holds.
  std::vector<Found> all;
  for (const Implementation* impl : impls) {
    Found f;
    f.impl = impl;
    f.name = impl->name;
    f.next = rounded(config.rate);
    all.push_back(std::move(f));
  }
  for (bool stepped = true; stepped;) {
    stepped = false;
    for (Found& f : all) {
      if (f.next == 0) continue;
      f.record(try_rate(*f.impl, config, f.next), config);
      stepped = true;
    }
  }
  print_table(config, all);
  for (const Found& f : all) {
    if (f.best.rate == 0) return 1;
  }
  return 0;
}

}  // namespace purgatory_bench
