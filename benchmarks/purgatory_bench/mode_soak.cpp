#include "mode_soak.hpp"

#include <algorithm>

#include <fmt/core.h>

namespace purgatory_bench {

std::string soak_summary(const Config& config, const std::vector<Sample>& samples,
                         const RunEnd& end, const Result& result) {
  std::vector<std::string> failures;
  if (!end.drained) {
    failures.push_back(fmt::format("{} requests unresolved {} s after the last arrival",
                                   end.arrived - end.resolved, kDrainLimit.count()));
  } else if (end.resolved != end.arrived) {
    failures.push_back(
        fmt::format("exactly-once: {} resolved for {} arrived", end.resolved, end.arrived));
  }
  if (end.early != 0) failures.push_back(fmt::format("{} completed early", end.early));

  const double warmup_s = std::min(60.0, 0.1 * config.duration_s);
  const Sample* warm = nullptr;
  double max_rss = end.end_rss_mib;
  std::size_t max_watched = 0;
  std::size_t max_delayed = 0;
  double sum_watched = 0;
  double sum_delayed = 0;
  int loaded = 0;
  for (const Sample& s : samples) {
    max_rss = std::max(max_rss, s.rss_mib);
    max_watched = std::max(max_watched, s.watched);
    max_delayed = std::max(max_delayed, s.delayed);
    if (!s.under_load) continue;
    if (warm == nullptr && s.t_s >= warmup_s) warm = &s;
    sum_watched += static_cast<double>(s.watched);
    sum_delayed += static_cast<double>(s.delayed);
    ++loaded;
  }

  fmt::print("  soak summary:\n");
  fmt::print("    requests: {} arrived, {} resolved ({} completed, {} expired), {} early\n",
             end.arrived, end.resolved, end.completed, end.expired, end.early);
  if (warm != nullptr) {
    fmt::print(
        "    RSS: {:.1f} MiB after warm-up (t={:.0f} s), {:.1f} MiB at end (t={:.0f} s), "
        "max {:.1f} MiB\n",
        warm->rss_mib, warm->t_s, end.end_rss_mib, end.end_t_s, max_rss);
    const double limit = warm->rss_mib * (1.0 + kRssGrowthLimit) + kRssSlackMiB;
    if (end.end_rss_mib > limit) {
      failures.push_back(fmt::format(
          "RSS grew from {:.1f} MiB after warm-up to {:.1f} MiB at end, limit {:.1f} MiB",
          warm->rss_mib, end.end_rss_mib, limit));
    }
  } else {
    fmt::print("    RSS: {:.1f} MiB at end (t={:.0f} s), max {:.1f} MiB\n", end.end_rss_mib,
               end.end_t_s, max_rss);
    failures.push_back(fmt::format("no sample under load after the {:g} s warm-up (--sample {})",
                                   warmup_s, config.sample_s));
  }
  if (loaded > 0) {
    fmt::print(
        "    purgatory size: max watched {} delayed {}, mean watched {:.0f} delayed {:.0f} "
        "({} samples under load)\n",
        max_watched, max_delayed, sum_watched / loaded, sum_delayed / loaded, loaded);
  }
  fmt::print("    rate {:.0f}/s (target {:.0f}/s), CPU {:.2f} s ({:.0f}% of one core)\n",
             result.achieved_rate, config.rate, result.cpu_s,
             100.0 * result.cpu_s / result.elapsed_s);

  std::string reasons;
  for (const std::string& f : failures)
    reasons += (reasons.empty() ? "" : "; ") + f;
  return reasons;
}

bool print_soak_verdict(const Results& results) {
  std::string reasons;
  for (const auto& [label, result] : results) {
    if (result.soak_failure.empty()) continue;
    reasons += (reasons.empty() ? "" : "; ") + (results.size() > 1 ? label + ": " : std::string()) +
               result.soak_failure;
  }
  if (!reasons.empty()) {
    fmt::print("soak: FAIL ({})\n", reasons);
    return true;
  }
  fmt::print("soak: PASS\n");
  return false;
}

}  // namespace purgatory_bench
