// purgatory_bench: Kafka's TestPurgatoryPerformance, against a naive purgatory.
//
// Four modes, each in its own file: the rate run (mode_rate.hpp: requests arriving at --rate,
// completed or expired, with CPU, RSS and latency figures), the soak (mode_soak.hpp: the rate run
// for --duration seconds, with a verdict), the memory per parked request (mode_parked.hpp) and
// the top speed (mode_max_rate.hpp: the highest rate each implementation sustains on time).
// The implementations, each in its own file behind purgatory_under_test.hpp: ours (the library's
// purgatory), naive (the obvious one), lean (a lower bound, not a purgatory) and null (the
// harness alone).
//
//   purgatory_bench --impl=both --num 1000000 --rate 100000 --pct50 20 --pct75 50
//                   --timeout 100 --keys 3 --key-space-size 1000   (one command line)
//
// --impl takes a comma list run one after the other in one process: `--impl=ours,null` also prints
// our CPU per request minus the harness's. Every run prints CPU per request, the arriving threads'
// own CPU per request and the heap allocations per request.

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "config.hpp"
#include "mode_max_rate.hpp"
#include "mode_parked.hpp"
#include "mode_rate.hpp"
#include "mode_rounds.hpp"
#include "mode_soak.hpp"
#include "purgatory_under_test.hpp"
#include "run_result.hpp"

namespace {

using purgatory_bench::Config;
using purgatory_bench::Implementation;

// "ours,null" -> {"ours", "null"}; "both" stands for ours,naive.
std::vector<std::string> impl_list(const std::string& list) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (from <= list.size()) {
    const std::size_t comma = std::min(list.find(',', from), list.size());
    const std::string name = list.substr(from, comma - from);
    if (name == "both") {
      out.insert(out.end(), {"ours", "naive"});
    } else if (!name.empty()) {
      out.push_back(name);
    }
    from = comma + 1;
  }
  return out;
}

const Implementation* find_implementation(std::string_view name) {
  for (const Implementation* impl :
       {&purgatory_bench::ours_implementation(), &purgatory_bench::naive_implementation(),
        &purgatory_bench::lean_implementation(), &purgatory_bench::null_implementation()}) {
    if (name == impl->name) return impl;
  }
  return nullptr;
}

// --impl's list, each name checked by the option's validator.
std::vector<const Implementation*> implementations(const std::string& list) {
  std::vector<const Implementation*> out;
  for (const std::string& name : impl_list(list))
    out.push_back(find_implementation(name));
  return out;
}

// --max-rate and the options that only it takes. Returns the flag.
CLI::Option* add_max_rate_options(CLI::App& app, Config& config, bool& max_rate) {
  CLI::Option* flag =
      app.add_flag("--max-rate", max_rate,
                   "top-speed mode: for each --impl (default ours,lean,naive), the highest rate "
                   "with p99 completion lateness <= --lateness-limit ms and nothing lost, found "
                   "from --rate by doubling then bisecting")
          ->excludes("--parked")
          ->excludes("--soak");
  CLI::Option* step =
      app.add_option("--step", config.step_s, "--max-rate: seconds of arrivals per step")
          ->check(CLI::Range(0.1, 600.0));
  CLI::Option* precision =
      app.add_option(
             "--precision", config.precision,
             "--max-rate: stop when the passing and failing rates are this close (0.05: 5%)")
          ->check(CLI::Range(0.005, 1.0));
  CLI::Option* limit = app.add_option("--max-rate-limit", config.max_rate_limit,
                                      "--max-rate: the highest rate tried, requests per second")
                           ->check(CLI::PositiveNumber);
  CLI::Option* lateness = app.add_option("--lateness-limit", config.lateness_limit_ms,
                                         "--max-rate: the p99 completion lateness allowed, ms")
                              ->check(CLI::PositiveNumber);
  for (CLI::Option* o : {step, precision, limit, lateness})
    o->needs(flag);
  return flag;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{"Purgatory performance (Kafka's TestPurgatoryPerformance)"};
  CLI::Option* num =
      app.add_option("--num", config.num, "number of requests")->check(CLI::PositiveNumber);
  CLI::Option* duration =
      app.add_option("--duration", config.duration_s,
                     "seconds of arrivals instead of --num requests; ends with a soak verdict")
          ->check(CLI::PositiveNumber)
          ->excludes(num);
  bool soak = false;
  app.add_flag("--soak", soak,
               "soak preset: --impl=ours --duration 600 --rate 100000 --sample 10 unless given")
      ->excludes(num);
  app.add_option("--csv", config.csv, "also write the samples to this CSV file");
  CLI::Option* rate =
      app.add_option("--rate", config.rate, "arrival rate, requests per second (Poisson)")
          ->check(CLI::PositiveNumber);
  app.add_option("--pct50", config.pct50, "median completion latency, ms (log-normal)")
      ->check(CLI::PositiveNumber);
  app.add_option("--pct75", config.pct75, "75th percentile completion latency, ms")
      ->check(CLI::PositiveNumber);
  app.add_option("--timeout", config.timeout_ms, "request timeout, ms")->check(CLI::PositiveNumber);
  app.add_option("--keys", config.keys, "keys watched per request")->check(CLI::PositiveNumber);
  app.add_option("--key-space-size", config.key_space, "number of distinct keys")
      ->check(CLI::PositiveNumber);
  app.add_option("--shards", config.shards, "watch-list shards (ours)")
      ->check(CLI::Range(1, 65536));
  CLI::Option* sample =
      app.add_option("--sample", config.sample_s, "sampling period (purgatory size, RSS), s")
          ->check(CLI::PositiveNumber);
  app.add_option("--executor", config.executor,
                 "where our expiries run: inline (the reaper thread) or thread (a second one)")
      ->check(CLI::IsMember({"inline", "thread"}));
  CLI::Option* impl =
      app.add_option(
             "--impl", config.impl,
             "ours, naive, lean (a lower bound, not a purgatory), null (the harness alone), "
             "or several one after the other in one process, comma-separated (both = "
             "ours,naive); with null, also prints each one's CPU per request minus the harness's")
          ->check([](const std::string& list) -> std::string {
            for (const std::string& name : impl_list(list)) {
              if (find_implementation(name) == nullptr) {
                return "unknown implementation '" + name + "' (ours, naive, lean, null, both)";
              }
            }
            return impl_list(list).empty() ? "no implementation given" : "";
          });
  app.add_option("--parked", config.parked,
                 "memory mode: park this many requests that wait for their timeout (one key each) "
                 "and print the RSS growth per request; each --impl in a process of its own")
      ->check(CLI::PositiveNumber)
      ->excludes(duration)
      ->excludes(num);
  app.add_option("--threads", config.threads,
                 "arriving threads sharing the purgatory, each with its own completer thread; "
                 "each issues --rate/N per second")
      ->check(CLI::Range(1, 64));
  CLI::Option* rounds =
      app.add_option("--rounds", config.rounds,
                     "run the --impl list this many times over, one after the other, and print "
                     "each one's median CPU per request (with null: minus the harness, and the "
                     "median ratio ours/lean over null)")
          ->check(CLI::Range(1, 1000))
          ->excludes(num)
          ->excludes("--parked")
          ->excludes("--soak");
  bool max_rate = false;
  add_max_rate_options(app, config, max_rate)->excludes(num)->excludes(duration)->excludes(rounds);
  CLI::Option* timeout_option = app.get_option("--timeout");
  CLI11_PARSE(app, argc, argv);
  if (config.parked > 0) {
    if (timeout_option->count() == 0) config.timeout_ms = 60'000;
    return purgatory_bench::run_parked(config, implementations(config.impl));
  }
  if (soak) {
    if (impl->count() == 0) config.impl = "ours";
    if (duration->count() == 0) config.duration_s = 600;
    if (rate->count() == 0) config.rate = 100'000;
    if (sample->count() == 0) config.sample_s = 10;
  }
  if (max_rate && impl->count() == 0) config.impl = "ours,lean,naive";
  const std::vector<const Implementation*> impls = implementations(config.impl);
  for (const Implementation* i : impls) {
    if (i->refusal == nullptr) continue;
    if (const std::string why = i->refusal(config); !why.empty()) {
      fmt::print(stderr, "{}\n", why);
      return 1;
    }
  }
  if (config.pct75 < config.pct50) {
    fmt::print(stderr, "--pct75 ({}) must not be below --pct50 ({})\n", config.pct75, config.pct50);
    return 1;
  }

  if (max_rate) return purgatory_bench::run_max_rate(config, impls);
  if (rounds->count() > 0) {
    if (config.duration_s <= 0) config.duration_s = 5;
    return purgatory_bench::run_rounds(config, impls);
  }

  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv(
      config.csv.empty() ? nullptr : std::fopen(config.csv.c_str(), "w"), &std::fclose);
  if (!config.csv.empty()) {
    if (!csv) {
      fmt::print(stderr, "--csv: cannot write {}\n", config.csv);
      return 1;
    }
    fmt::print(csv.get(), "time_s,arrived,resolved,pending,rss_mib,watched,impl\n");
  }

  purgatory_bench::Results results;
  for (const Implementation* i : impls)
    results.emplace_back(i->name, i->run(config, i->name, csv.get()));

  const bool failed = config.duration_s > 0 && purgatory_bench::print_soak_verdict(results);
  // Last, as scripts/bench-report and the README read it.
  purgatory_bench::print_comparisons(results);
  return failed ? 1 : 0;
}
