// The rate run: requests arrive as a Poisson process at --rate per second (--num of them, or for
// --duration seconds: a soak), each watching --keys random keys of --key-space-size and drawing a
// log-normal completion latency (--pct50, --pct75). A request whose latency is below --timeout is
// completed at that time by a completer thread; the others expire. Prints the achieved rate, the
// process CPU time, the peak RSS, the CPU and heap allocations per request and the completion and
// expiry latency percentiles, and every --sample seconds a line with the purgatory's size, the
// requests arrived and resolved so far and the current RSS. --threads N: N arriving threads, each
// with its own completer, share one purgatory (each issues --rate/N per second).
//
// run_rate<P>() strings together the steps of RateRun (mode_rate.cpp, the same for every
// implementation) around the arrival loop, issue_requests<P>(), which is here so that it inlines
// the implementation's add() and complete().
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "completer.hpp"
#include "config.hpp"
#include "latency_sampler.hpp"
#include "process_metrics.hpp"
#include "purgatory_under_test.hpp"
#include "run_result.hpp"
#include "stats.hpp"

namespace purgatory_bench {

// The gauges the sampler reads from the implementation.
struct Gauges {
  std::size_t watched = 0;
  std::size_t delayed = 0;
};

// One arriving thread: its share of the requests, and its account of them.
struct ArrivingThread {
  int index = 0;    // seeds its random streams
  long share = 0;   // requests to issue, without --duration
  double rate = 0;  // its arrivals per second
  long issued = 0;
  Clock::time_point last;  // the end of its last batch
  double cpu_s = 0;        // its own CPU time, up to its last arrival
};

// The steps of a rate run, in the order run_rate() takes them.
class RateRun {
 public:
  // Prints the run's header line and starts measuring.
  RateRun(const Config& config, const char* label, std::FILE* csv);
  ~RateRun();
  RateRun(const RateRun&) = delete;
  RateRun& operator=(const RateRun&) = delete;

  // Samples the gauges, the counters and the RSS every --sample seconds until stop_sampler().
  // Quiet runs (--max-rate's steps) sample nothing.
  void start_sampler(std::function<Gauges()> gauges);
  // Runs --threads arriving threads (this one the first) and waits for their last arrival.
  void arrive(const std::function<void(ArrivingThread&)>& issue);
  // Waits until every request is resolved (a timed run gives up after kDrainLimit).
  void drain();
  void stop_sampler();
  // Once the implementation is gone: the figures, printed (with the soak summary when timed).
  Result finish();

  [[nodiscard]] const Config& config() const { return config_; }
  [[nodiscard]] bool timed() const { return config_.duration_s > 0; }
  [[nodiscard]] Clock::time_point start() const { return start_; }
  Stats& stats() { return stats_; }
  // Called by the arriving threads once per batch, for the sampler.
  void count_arrived(long batch) { arrived_.fetch_add(batch, std::memory_order_relaxed); }

 private:
  void print_header() const;
  void sample(const std::function<Gauges()>& gauges);

  const Config& config_;
  const char* label_;
  std::FILE* csv_;
  Stats stats_;
  std::uint64_t allocations0_ = 0;
  double cpu0_ = 0;
  Clock::time_point start_;
  Clock::time_point last_issue_;
  Result result_;
  RunEnd end_;
  std::vector<Sample> samples_;  // the sampler's, read once it is joined
  std::atomic<bool> sampling_{true};
  std::atomic<long> arrived_{0};  // published by the arriving threads once per batch
  std::atomic<bool> under_load_{true};
  std::thread sampler_;
};

// One arriving thread's loop: issues its share (Poisson, its own random streams) and hands the
// requests that complete in time to its own completer.
template <PurgatoryUnderTest Impl>
void issue_requests(Impl& impl, RateRun& run, ArrivingThread& me) {
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  using Handle = typename Impl::Handle;
  const Config& config = run.config();
  const double cpu_start = thread_cpu_seconds();
  Completer<Handle, std::function<void(const Handle&)>> completer(
      [&impl](const Handle& h) { impl.complete(h); });
  const auto seed = static_cast<std::uint64_t>(me.index) * 1000;
  std::mt19937_64 rng(1 + seed);
  std::exponential_distribution<double> gap(me.rate);
  std::uniform_int_distribution<int> key_dist(0, config.key_space - 1);
  LatencySampler latency(config.pct50, config.pct75, 2 + seed);
  const nanoseconds timeout = std::chrono::milliseconds(config.timeout_ms);
  std::vector<int> keys(static_cast<std::size_t>(config.keys));
  Stats& stats = run.stats();
  const Clock::time_point start = run.start();
  // Locals, not reads through `run` and `me`: the loop keeps them in registers across add().
  const bool timed = run.timed();
  const double duration_s = config.duration_s;
  const long share = me.share;
  double arrival_s = 0;
  long i = 0;
  const auto more = [&] { return timed ? arrival_s < duration_s : i < share; };
  // A --max-rate step gives up issuing at this wall time (an overloaded implementation could
  // otherwise take minutes to issue a few seconds' worth); the shortfall shows in its achieved
  // rate.
  const auto give_up =
      config.give_up_s > 0
          ? start + duration_cast<nanoseconds>(std::chrono::duration<double>(config.give_up_s))
          : Clock::time_point::max();
  me.last = start;
  while (more()) {
    // Issue every request due by now in one batch, then sleep until the next one is due: a
    // sleep per request could not sustain 100k/s.
    const auto now = Clock::now();
    if (now > give_up) break;
    const auto next_due =
        start + duration_cast<nanoseconds>(std::chrono::duration<double>(arrival_s));
    if (next_due > now) {
      // At least 1 ms per nap: at 100k/s that is ~100 arrivals per batch, and the generator
      // wakes 1000 times a second instead of once per request.
      std::this_thread::sleep_until(std::max(next_due, now + std::chrono::milliseconds(1)));
      continue;
    }
    long batch = 0;
    while (more()) {
      const auto due = start + duration_cast<nanoseconds>(std::chrono::duration<double>(arrival_s));
      if (due > now) break;
      const double latency_ms = latency.next_ms();
      const auto completes_at =
          due + duration_cast<nanoseconds>(std::chrono::duration<double, std::milli>(latency_ms));
      for (int& k : keys)
        k = key_dist(rng);
      auto handle = impl.add(timeout, due, completes_at, keys, stats);
      if (completes_in_time(due, completes_at, timeout)) {
        completer.add(completes_at, std::move(handle));
      }
      arrival_s += gap(rng);
      ++i;
      ++batch;
    }
    completer.flush();
    run.count_arrived(batch);
    me.last = Clock::now();
  }
  me.issued = i;
  me.cpu_s = thread_cpu_seconds() - cpu_start;  // before waiting for its completer
  // The completer finishes what it holds before the thread goes on (its destructor).
}

template <PurgatoryUnderTest Impl>
Result run_rate(const Config& config, const char* label, std::FILE* csv) {
  RateRun run(config, label, csv);
  {
    Impl impl(config);
    run.start_sampler([&impl] { return Gauges{impl.watched(), impl.delayed()}; });
    run.arrive([&](ArrivingThread& me) { issue_requests(impl, run, me); });
    run.drain();
    run.stop_sampler();
    impl.shutdown();
  }
  return run.finish();
}

// The comparisons of a run of several implementations, printed last: ours against naive, and each
// one's CPU per request minus the harness's (null's).
void print_comparisons(const Results& results);

}  // namespace purgatory_bench
