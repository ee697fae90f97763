// The sweeps' driver and bookkeeping.
//
// run_sweep() runs a scenario once with nothing failing (the clean run), then for k = 1, 2, ...
// with its k-th allocation failing, until a run reaches fewer than k allocations: each allocation
// of the clean run has then failed once (the scenario is deterministic, single-threaded on a
// manual clock, so run k reaches the same first k allocations). Then again with every allocation
// from the k-th on failing, so that what a failure path allocates fails too. Each run is on a
// fresh thread, so that thread-local caches (the task pool's heap, the thread's timer slot) start
// as cold as in the clean run. The scenario checks its own promises into a Verdict (every task
// and operation has exactly one outcome, counters back to 0); a run that terminates names itself
// on stderr first.
#pragma once

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "fault_injection.hpp"

namespace purgatory::sweep {

// What one run of a scenario found wrong. Written by the scenario's thread, read after it ended.
class Verdict {
 public:
  // Names the step under way (a string literal), for the problems found in it.
  void at(const char* step) noexcept { step_ = step; }
  void expect(bool ok, const char* what) {
    if (!ok) fail(what);
  }
  void fail(std::string_view what) {
    const Unarmed unarmed;  // the test's bookkeeping is not the scenario's
    ++count_;
    if (problems_.size() < 8) problems_.push_back(std::string(step_) + ": " + std::string(what));
  }
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] const std::vector<std::string>& problems() const noexcept { return problems_; }

 private:
  const char* step_ = "start";
  std::uint64_t count_ = 0;
  std::vector<std::string> problems_;
};

struct Report {
  std::string name;
  std::uint64_t clean_allocations = 0;  // allocations reached by the run with nothing failing
  std::uint64_t transient_runs = 0;     // runs that failed one allocation: the k-th, k = 1, 2, ...
  std::uint64_t persistent_runs = 0;    // runs that failed the k-th and every later allocation
  std::uint64_t persistent_failed = 0;  // allocations those runs failed, in all
  std::uint64_t problem_count = 0;
  std::vector<std::string> problems;  // the first few, each naming its run
};

namespace detail {

// Names the run under way, for a run that calls std::terminate().
inline const char* g_scenario = "";
inline std::uint64_t g_k = 0;
inline const char* g_mode = "";

inline void name_run_and_abort() {
  std::fprintf(stderr, "sweep: std::terminate() in scenario '%s', %s run k = %llu\n", g_scenario,
               g_mode, static_cast<unsigned long long>(g_k));
  std::abort();
}

template <class Scenario>
Counts run_once(Scenario& scenario, std::uint64_t k, Mode mode, Verdict& verdict) {
  g_k = k;
  g_mode = k == 0 ? "clean" : mode == Mode::transient ? "transient" : "persistent";
  Counts counts;
  std::thread run([&] {
    arm(k, mode);
    try {
      scenario(verdict);
    } catch (const std::exception& e) {
      const Unarmed unarmed;
      verdict.fail(std::string("an exception escaped the scenario: ") + e.what());
    }
    counts = disarm();
  });
  run.join();
  return counts;
}

inline void note(Report& report, const Verdict& verdict, const char* mode, std::uint64_t k) {
  report.problem_count += verdict.count();
  for (const std::string& p : verdict.problems()) {
    if (report.problems.size() < 12) {
      report.problems.push_back(std::string(mode) + " run k = " + std::to_string(k) + ": " + p);
    }
  }
}

}  // namespace detail

template <class Scenario>
Report run_sweep(const char* name, Scenario scenario) {
  const std::terminate_handler previous = std::set_terminate(&detail::name_run_and_abort);
  detail::g_scenario = name;
  Report report;
  report.name = name;
  {
    // Once unarmed first: state made once per process (a thread-slot table grown for the first
    // threads, function-local statics) is in place, so that every later run is alike.
    Verdict verdict;
    (void)detail::run_once(scenario, 0, Mode::transient, verdict);
    detail::note(report, verdict, "warm-up", 0);
  }
  {
    Verdict verdict;
    report.clean_allocations = detail::run_once(scenario, 0, Mode::transient, verdict).allocations;
    detail::note(report, verdict, "clean", 0);
  }
  for (std::uint64_t k = 1;; ++k) {
    Verdict verdict;
    if (detail::run_once(scenario, k, Mode::transient, verdict).injected == 0) break;
    ++report.transient_runs;
    detail::note(report, verdict, "transient", k);
  }
  for (std::uint64_t k = 1;; ++k) {
    Verdict verdict;
    const Counts counts = detail::run_once(scenario, k, Mode::persistent, verdict);
    if (counts.injected == 0) break;
    ++report.persistent_runs;
    report.persistent_failed += counts.injected;
    detail::note(report, verdict, "persistent", k);
  }
  std::printf(
      "allocation sweep: %-44s %4llu allocations, each failed once (%llu runs); from the k-th "
      "on: %llu runs, %llu allocations failed; %llu problems%s%s\n",
      name, static_cast<unsigned long long>(report.clean_allocations),
      static_cast<unsigned long long>(report.transient_runs),
      static_cast<unsigned long long>(report.persistent_runs),
      static_cast<unsigned long long>(report.persistent_failed),
      static_cast<unsigned long long>(report.problem_count),
      report.problems.empty() ? "" : ", first: ",
      report.problems.empty() ? "" : report.problems.front().c_str());
  std::fflush(stdout);
  std::set_terminate(previous);
  return report;
}

}  // namespace purgatory::sweep
