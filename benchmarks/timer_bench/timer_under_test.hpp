// The one interface every timer under test offers the workloads, and what they all share: the
// payload a task runs and the loop that drives a benchmark's iterations.
//
// A timer under test T owns its tasks:
//   T(n)                 tasks 0..n-1, none scheduled
//   t.add(i, d)          schedules task i d from now (moving it if it is scheduled)
//   t.add_at(i, ns)      the same at an absolute steady_clock deadline, in ns since its epoch
//   t.cancel(i)          whether it stopped a pending run
//   t.expire_due()       runs every task due now
//   t.runs(i)            how many times task i ran
//   t.loop(state, body)  runs body() once per benchmark iteration, kRound per batch
// and may offer more, which the workloads use where it is there:
//   t.reschedule(i, d)             moves task i in place (the wheel's SystemTimer::reschedule)
//   t.library_bytes_per_task(n)    what the library adds to each of n pending tasks (the wheel)
//   t.aborted()                    handlers run for cancelled waits (Asio)
//   t.start_io_thread(), t.stop_io_thread()  a thread of its own runs its handlers while
//                                  benchmark threads add and cancel (Asio)
//
// These headers make up one translation unit, main.cpp's, and their code has internal linkage (an
// unnamed namespace) as it had when the program was one file: g++ then inlines the functions each
// benchmark calls once (plain_loop, loop, the workloads) into it, so the timed loops keep their
// counters in registers and compile to the same code as before the split.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>

#include <benchmark/benchmark.h>

#include "purgatory/timer/clock.hpp"

namespace timer_bench {
namespace {

using purgatory::Nanos;

constexpr int kRound = 32;  // iterations per KeepRunningBatch / Asio loop pass

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The callback every implementation runs when a task expires.
struct Payload {
  std::uint64_t runs = 0;
  void operator()() noexcept {
    ++runs;
    benchmark::DoNotOptimize(runs);
  }
};

// Runs body() once per iteration, kRound iterations per KeepRunningBatch call.
template <class Body>
void plain_loop(benchmark::State& state, Body& body) {
  while (state.KeepRunningBatch(kRound)) {
    for (int k = 0; k < kRound; ++k)
      body();
  }
}

// What a body passed to loop() looks like.
struct LoopBody {
  void operator()() {}
};

template <class T>
concept TimerUnderTest = std::constructible_from<T, std::size_t> &&
    requires(T t, const T& c, std::size_t i, Nanos d, std::int64_t deadline,
             benchmark::State& state, LoopBody& body) {
  t.add(i, d);
  t.add_at(i, deadline);
  { t.cancel(i) } -> std::same_as<bool>;
  t.expire_due();
  { c.runs(i) } -> std::same_as<std::uint64_t>;
  t.loop(state, body);
};

}  // namespace
}  // namespace timer_bench
