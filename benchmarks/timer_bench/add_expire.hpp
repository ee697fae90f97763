// How fast is add+expire with `pending` tasks: each iteration schedules `pending` tasks 0..100 ms
// out (timed), sleeps until all are due (untimed), then expires and runs them all (timed). Time
// per item = its share of the adds and of the expiry, including any cascade between wheel levels.
// An iteration sleeps ~100 ms, so the registrations fix the iteration counts (their names end in
// /iterations:N) to keep the whole program at about two minutes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <thread>

#include <benchmark/benchmark.h>

#include "timer_under_test.hpp"
#include "workload.hpp"

namespace timer_bench {
namespace {

template <TimerUnderTest Impl>
void add_expire(benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  Impl impl(pending);
  const auto delays = random_delays(pending, kExpireSpan);
  std::uint64_t rounds = 0;
  bool ok = true;
  for (auto _ : state) {
    for (std::size_t i = 0; i < pending; ++i)
      impl.add(i, delays[i]);
    state.PauseTiming();
    for (std::size_t i = 0; i < pending; ++i)
      ok = ok && impl.runs(i) == rounds;  // none ran early
    std::this_thread::sleep_for(kExpireSpan + kExpireSlack);
    state.ResumeTiming();
    impl.expire_due();
    ++rounds;
  }
  for (std::size_t i = 0; i < pending; ++i)
    ok = ok && impl.runs(i) == rounds;
  if (!ok) state.SkipWithError("a task did not run exactly once per round");
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

}  // namespace
}  // namespace timer_bench
