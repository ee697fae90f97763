// What one run of one implementation yields: its figures, its samples, its counters at the end.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace purgatory_bench {

struct Result {
  double cpu_s = 0;
  double elapsed_s = 0;
  double achieved_rate = 0;
  long peak_rss_kib = 0;
  long requests = 0;
  double arriving_cpu_s = 0;  // the arriving threads' own CPU time (RUSAGE_THREAD)
  double allocations = 0;     // heap allocations (operator new) in the process during the run
  std::string soak_failure;   // why a timed run failed its soak checks; empty if it passed
  // What --max-rate judges a step by.
  double lateness_p99_ms = 0;  // completion lateness (intended completion time -> on_complete)
  double expiry_p99_ms = 0;    // arrival -> on_expiration
  long resolved = 0;           // requests resolved once the run drained (or gave up)
  long early = 0;              // completed before their intended time
  bool drained = false;        // every request resolved before the drain limit

  // Process CPU time per request, in microseconds.
  [[nodiscard]] double cpu_per_request_us() const {
    return 1e6 * cpu_s / static_cast<double>(requests > 0 ? requests : 1);
  }
};

// Each implementation's result, in the order of --impl.
using Results = std::vector<std::pair<std::string, Result>>;

// One line of the sampler's output.
struct Sample {
  double t_s = 0;
  long arrived = 0;
  long resolved = 0;
  std::size_t watched = 0;
  std::size_t delayed = 0;
  double rss_mib = 0;
  bool under_load = false;  // taken before the last arrival
};

// What a timed run checks at its end, from its samples and counters.
struct RunEnd {
  long arrived = 0;
  long resolved = 0;  // after shutdown: every callback has run
  long completed = 0;
  long expired = 0;
  long early = 0;
  bool drained = false;
  double end_t_s = 0;  // the last arrival
  double end_rss_mib = 0;
};

}  // namespace purgatory_bench
