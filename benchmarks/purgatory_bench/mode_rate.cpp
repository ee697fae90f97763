#include "mode_rate.hpp"

#include <algorithm>
#include <string>

#include <fmt/core.h>

#include "mode_soak.hpp"

namespace purgatory_bench {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

std::string ms(nanoseconds d) {
  return fmt::format("{:.2f}", static_cast<double>(d.count()) / 1e6);
}

void print_latency(const char* what, const purgatory::LatencyHistogram& h) {
  const auto s = h.summary();
  fmt::print("  {} latency (ms, {} samples): p50 {} p75 {} p99 {} p99.9 {} max {}\n", what, s.count,
             ms(s.p50), ms(h.percentile(0.75)), ms(s.p99), ms(s.p999), ms(s.max));
}

}  // namespace

RateRun::RateRun(const Config& config, const char* label, std::FILE* csv)
    : config_(config), label_(label), csv_(csv) {
  if (!config.quiet) print_header();
  reset_peak_rss();
  allocations0_ = allocations_so_far();
  cpu0_ = process_cpu_seconds();
  start_ = Clock::now();
}

void RateRun::print_header() const {
  const Config& config = config_;
  fmt::print(
      "== {}: {} at {:.0f}/s, latency pct50 {} ms pct75 {} ms, timeout {} ms, {} keys of {}\n",
      label_,
      timed() ? fmt::format("{} s of requests", config.duration_s)
              : fmt::format("{} requests", config.num),
      config.rate, config.pct50, config.pct75, config.timeout_ms, config.keys, config.key_space);
  std::fflush(stdout);
}

RateRun::~RateRun() {
  stop_sampler();
}

void RateRun::start_sampler(std::function<Gauges()> gauges) {
  if (config_.quiet) return;
  sampler_ = std::thread([this, gauges = std::move(gauges)] {
    const auto period = duration_cast<nanoseconds>(std::chrono::duration<double>(config_.sample_s));
    auto next = start_ + period;
    while (sampling_.load()) {
      std::this_thread::sleep_until(std::min(next, Clock::now() + milliseconds(20)));
      if (Clock::now() < next) continue;
      sample(gauges);
      next += period;
    }
  });
}

void RateRun::sample(const std::function<Gauges()>& gauges) {
  Sample s;
  s.under_load = under_load_.load();
  s.t_s = std::chrono::duration<double>(Clock::now() - start_).count();
  s.arrived = arrived_.load(std::memory_order_relaxed);
  s.resolved = stats_.resolved.load(std::memory_order_relaxed);
  const Gauges g = gauges();
  s.watched = g.watched;
  s.delayed = g.delayed;
  s.rss_mib = rss_mib();
  fmt::print(
      "  t={:6.2f}s purgatory size: watched {} delayed {}, arrived {} resolved {}, RSS "
      "{:.1f} MiB\n",
      s.t_s, s.watched, s.delayed, s.arrived, s.resolved, s.rss_mib);
  std::fflush(stdout);
  if (csv_ != nullptr) {
    fmt::print(csv_, "{:.2f},{},{},{},{:.2f},{},{}\n", s.t_s, s.arrived, s.resolved, s.delayed,
               s.rss_mib, s.watched, label_);
    std::fflush(csv_);
  }
  samples_.push_back(s);
}

void RateRun::arrive(const std::function<void(ArrivingThread&)>& issue) {
  const int threads = config_.threads;
  std::vector<ArrivingThread> arriving(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    ArrivingThread& a = arriving[static_cast<std::size_t>(t)];
    a.index = t;
    // The first (this thread, the only one by default) takes what the division leaves over.
    a.share =
        t == 0 ? config_.num - (config_.num / threads) * (threads - 1) : config_.num / threads;
    a.rate = config_.rate / threads;
    a.last = start_;
  }
  {
    std::vector<std::thread> others;
    for (std::size_t t = 1; t < arriving.size(); ++t)
      others.emplace_back([&issue, &a = arriving[t]] { issue(a); });
    issue(arriving[0]);
    for (std::thread& t : others)
      t.join();
  }
  long issued = 0;
  last_issue_ = start_;
  for (const ArrivingThread& a : arriving) {
    issued += a.issued;
    last_issue_ = std::max(last_issue_, a.last);
    result_.arriving_cpu_s += a.cpu_s;
  }
  const double issue_s = std::chrono::duration<double>(last_issue_ - start_).count();
  result_.achieved_rate = static_cast<double>(issued) / issue_s;
  end_.arrived = issued;
  end_.end_t_s = issue_s;
  end_.end_rss_mib = rss_mib();
  under_load_ = false;
}

void RateRun::drain() {
  // Without --duration, waits however long the backlog takes (scripts/bench-report bounds it).
  end_.drained = true;
  while (stats_.resolved.load() < end_.arrived) {
    if (timed() && Clock::now() - last_issue_ > kDrainLimit) {
      end_.drained = false;
      break;
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  result_.elapsed_s = std::chrono::duration<double>(Clock::now() - start_).count();
}

void RateRun::stop_sampler() {
  if (!sampler_.joinable()) return;
  sampling_ = false;
  sampler_.join();
}

Result RateRun::finish() {
  Result& result = result_;
  result.cpu_s = process_cpu_seconds() - cpu0_;
  result.peak_rss_kib = status_kib("VmHWM");
  result.requests = end_.arrived;
  result.allocations = static_cast<double>(allocations_so_far() - allocations0_);
  result.lateness_p99_ms = static_cast<double>(stats_.lateness.summary().p99.count()) / 1e6;
  result.expiry_p99_ms = static_cast<double>(stats_.expiry.summary().p99.count()) / 1e6;
  end_.resolved = stats_.resolved.load();
  end_.completed = static_cast<long>(stats_.completion.count());
  end_.expired = static_cast<long>(stats_.expiry.count());
  end_.early = stats_.early.load();
  result.resolved = end_.resolved;
  result.early = end_.early;
  result.drained = end_.drained;
  if (config_.quiet) return result;

  fmt::print("  target rate {:.0f}/s, achieved rate {:.0f}/s ({:+.1f}%)\n", config_.rate,
             result.achieved_rate, 100.0 * (result.achieved_rate / config_.rate - 1.0));
  fmt::print("  elapsed {:.2f} s, process CPU time {:.2f} s ({:.0f}% of one core)\n",
             result.elapsed_s, result.cpu_s, 100.0 * result.cpu_s / result.elapsed_s);
  fmt::print("  peak RSS {:.1f} MiB\n", static_cast<double>(result.peak_rss_kib) / 1024.0);
  const auto requests = static_cast<double>(std::max(result.requests, 1L));
  fmt::print(
      "  CPU per request {:.3f} us (arriving threads {:.3f} us), heap allocations per request "
      "{:.3f}\n",
      1e6 * result.cpu_s / requests, 1e6 * result.arriving_cpu_s / requests,
      result.allocations / requests);
  print_latency("completion", stats_.completion);
  print_latency("completion lateness", stats_.lateness);
  print_latency("expiry", stats_.expiry);
  if (stats_.early.load() != 0) fmt::print("  ERROR: {} completed early\n", stats_.early.load());
  if (timed()) {
    result.soak_failure = soak_summary(config_, samples_, end_, result);
  }
  std::fflush(stdout);
  return result;
}

void print_comparisons(const Results& results) {
  const auto find = [&](const char* label) -> const Result* {
    for (const auto& [name, result] : results) {
      if (name == label) return &result;
    }
    return nullptr;
  };
  const Result* ours = find("ours");
  const Result* naive = find("naive");
  const Result* null = find("null");
  if (ours != nullptr && naive != nullptr) {
    fmt::print("cpu ours {:.2f} s, naive {:.2f} s\n", ours->cpu_s, naive->cpu_s);
    fmt::print("cpu ratio naive/ours: {:.2f}\n", naive->cpu_s / ours->cpu_s);
  }
  if (null != nullptr) {
    for (const auto& [name, result] : results) {
      if (name == "null") continue;
      fmt::print("cpu per request minus the harness: {} {:.3f} us ({:.3f} - {:.3f})\n", name,
                 result.cpu_per_request_us() - null->cpu_per_request_us(),
                 result.cpu_per_request_us(), null->cpu_per_request_us());
    }
  }
}

}  // namespace purgatory_bench
