// The one interface every purgatory under test offers the harness. Ours (the library's
// DelayedOperationPurgatory), naive, lean and null each implement it in a file of their own
// (impl_*.cpp); the modes (mode_*.hpp) are written against it and instantiated in those files,
// so that the hot calls (add, complete) inline into the arrival loop as in one file.
//
// A purgatory under test P is built from the Config, and
//   P::Handle h = p.add(timeout, arrival, completes_at, keys, stats)
//       watches `keys` for a request that arrived at `arrival`. It expires `timeout` after that
//       unless p.complete(h) comes first: the completer calls it at `completes_at` when
//       completes_in_time() says so. Either outcome is recorded in `stats`, exactly once.
//   p.complete(h)             completes the request unless it is already resolved (called from
//                             a completer thread while others add)
//   p.watched(), p.delayed()  the sampler's gauges (0 where the implementation keeps none)
//   p.shutdown()              stops its threads, before it is destroyed
// One that can be parked (--parked, the memory mode) also has
//   P::Handle h = p.park(timeout, key, stats)  a request that waits for its timeout on one key
//   P::parked_object()                         what a parked request is made of, in words
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "config.hpp"
#include "run_result.hpp"
#include "stats.hpp"

namespace purgatory_bench {

template <class P>
concept PurgatoryUnderTest = std::constructible_from<P, const Config&> &&
    requires(P p, const P& gauges, std::chrono::nanoseconds timeout, Clock::time_point t,
             const std::vector<int>& keys, Stats& stats, const typename P::Handle& handle) {
  { p.add(timeout, t, t, keys, stats) } -> std::same_as<typename P::Handle>;
  p.complete(handle);
  { gauges.watched() } -> std::convertible_to<std::size_t>;
  { gauges.delayed() } -> std::convertible_to<std::size_t>;
  p.shutdown();
};

template <class P>
concept ParkablePurgatory = PurgatoryUnderTest<P> &&
    requires(P p, std::chrono::nanoseconds timeout, int key, Stats& s) {
  { p.park(timeout, key, s) } -> std::same_as<typename P::Handle>;
  { P::parked_object() } -> std::convertible_to<std::string>;
};

// An implementation as --impl names it, with the modes instantiated for it.
struct Implementation {
  const char* name;
  // The rate run (a soak with --duration): prints its figures and returns them.
  Result (*run)(const Config& config, const char* label, std::FILE* csv);
  // --parked: returns the RSS growth per parked request, negative on failure. Null: none.
  double (*park)(const Config& config, const char* label);
  // Why it cannot run this workload, or ""; null when it runs any.
  std::string (*refusal)(const Config& config);
};

const Implementation& ours_implementation();
const Implementation& naive_implementation();
const Implementation& lean_implementation();
const Implementation& null_implementation();

}  // namespace purgatory_bench
