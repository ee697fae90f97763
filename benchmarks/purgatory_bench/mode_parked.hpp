// Memory: --parked N parks N requests that never complete, each on one key of --key-space-size
// with --timeout (60 s unless given), this process holding a reference to each (as a server holds
// its pending requests), and prints how much the process's RSS grew per parked request. Each
// implementation of --impl runs in a child process of its own, so that none reuses memory another
// freed. Ours parks make_operation() lambdas capturing two pointers (16 bytes, as a long-poll's
// request and connection); lean and naive park their own request objects (24 bytes of payload).
// The references' own array is allocated and touched before the first reading: it is the
// caller's memory, the same for every implementation.
//
//   purgatory_bench --parked 1000000 --impl=ours,lean,naive
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "config.hpp"
#include "process_metrics.hpp"
#include "purgatory_under_test.hpp"
#include "stats.hpp"

namespace purgatory_bench {

// Parks config.parked requests and returns the RSS growth per request, in bytes (negative: a
// request was resolved while parked, or not exactly once after).
template <ParkablePurgatory Impl>
double park(const Config& config, const char* label) {
  Stats stats;
  const auto n = static_cast<std::size_t>(config.parked);
  const std::chrono::nanoseconds timeout = std::chrono::milliseconds(config.timeout_ms);
  double per_request = 0;
  {
    Impl impl(config);
    std::vector<typename Impl::Handle> handles(n);  // value-initialized: its pages are resident
    const long before_kib = status_kib("VmRSS");
    const auto start = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      handles[i] = impl.park(
          timeout, static_cast<int>(i % static_cast<std::size_t>(config.key_space)), stats);
    }
    const double park_s = std::chrono::duration<double>(Clock::now() - start).count();
    const long after_kib = status_kib("VmRSS");
    per_request = 1024.0 * static_cast<double>(after_kib - before_kib) / static_cast<double>(n);
    fmt::print(
        "== {}: parked {} requests on {} keys (timeout {} ms) in {:.2f} s: RSS {:.1f} -> {:.1f} "
        "MiB, {:.1f} bytes per parked request ({})\n",
        label, n, config.key_space, config.timeout_ms, park_s,
        static_cast<double>(before_kib) / 1024.0, static_cast<double>(after_kib) / 1024.0,
        per_request, Impl::parked_object());
    if (stats.resolved.load() != 0) {
      fmt::print("  ERROR: {} requests resolved while parked\n", stats.resolved.load());
      per_request = -1;
    }
    // Then each is resolved once (completed), before the implementation goes. (Naive's
    // completions each walk their key's watchers: at 1,000,000 on 1,000 keys this takes it about
    // a minute.)
    for (const auto& h : handles)
      impl.complete(h);
    impl.shutdown();
    if (stats.resolved.load() != static_cast<long>(n)) {
      fmt::print("  ERROR: {} of {} parked requests resolved\n", stats.resolved.load(), n);
      per_request = -1;
    }
    std::fflush(stdout);
  }
  return per_request;
}

// Parks with each of `impls` that can park, each in a child process, and prints the bytes per
// parked request of each last, for scripts. Returns the exit status: 1 if any failed.
int run_parked(const Config& config, const std::vector<const Implementation*>& impls);

}  // namespace purgatory_bench
