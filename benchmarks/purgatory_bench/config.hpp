// The workload and the mode of one purgatory_bench invocation, as its command line sets them.
#pragma once

#include <cstddef>
#include <string>

namespace purgatory_bench {

struct Config {
  long num = 1'000'000;
  double rate = 100'000;
  double pct50 = 20;
  double pct75 = 50;
  long timeout_ms = 100;
  int keys = 3;
  int key_space = 1000;
  std::size_t shards = 16;
  double sample_s = 1.0;
  std::string impl = "ours";
  std::string executor = "inline";
  long parked = 0;        // > 0: the memory mode (--parked)
  int threads = 1;        // arriving threads, each with its own completer
  double duration_s = 0;  // > 0: arrivals for this long instead of `num` requests (a soak)
  std::string csv;
  int rounds = 1;  // > 1: the --impl list that many times over (mode_rounds.hpp)
  // No figures printed per run (--max-rate prints a line per step instead).
  bool quiet = false;
  // > 0: no arrivals issued after this many seconds of wall time (a --max-rate step).
  double give_up_s = 0;
  // --max-rate: seconds of arrivals per step, the relative width the search stops at, its bound
  double step_s = 4;
  double precision = 0.05;
  double max_rate_limit = 4'000'000;
  double lateness_limit_ms = 2.0;
};

}  // namespace purgatory_bench
