// Does add+cancel scale with threads (AddCancelThreads): `pending` tasks wait (added untimed by
// the setup thread); each benchmark thread then adds and cancels its own probe task, as request
// threads of a server do with their timeouts. Reported: pairs per second over all threads, on the
// real clock (items_per_second), so threads:2 against threads:1 is the scaling. One timer (ours:
// its bases; Asio: one io_context, run by a thread of its own so that the aborted handlers run)
// shared by the threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <benchmark/benchmark.h>

#include "timer_under_test.hpp"
#include "workload.hpp"

namespace timer_bench {
namespace {

constexpr int kMaxThreads = 8;
// The probes are created one after the other, so neighbours in memory; threads' probes sit
// kProbeStride tasks apart so that two threads never write one cache line (that would measure
// the harness's false sharing, not the timer: a server's request threads make their own tasks).
constexpr std::size_t kProbeStride = 8;

template <TimerUnderTest Impl>
struct SharedImpl {
  static inline std::unique_ptr<Impl> impl;
};

template <TimerUnderTest Impl>
void shared_setup(const benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  SharedImpl<Impl>::impl = std::make_unique<Impl>(pending + kMaxThreads * kProbeStride);
  schedule_pending(*SharedImpl<Impl>::impl, pending, kCancelSpan);
  if constexpr (requires(Impl & i) { i.start_io_thread(); }) {
    SharedImpl<Impl>::impl->start_io_thread();
  }
}

template <TimerUnderTest Impl>
void shared_teardown(const benchmark::State&) {
  if constexpr (requires(Impl & i) { i.stop_io_thread(); })
    SharedImpl<Impl>::impl->stop_io_thread();
  SharedImpl<Impl>::impl.reset();
}

template <TimerUnderTest Impl>
void add_cancel_threads(benchmark::State& state) {
  Impl& impl = *SharedImpl<Impl>::impl;
  const std::size_t probe = static_cast<std::size_t>(state.range(0)) +
                            static_cast<std::size_t>(state.thread_index()) * kProbeStride;
  const auto delays = random_delays(kTableSize, kCancelSpan, kSeed + 7 + state.thread_index());
  std::size_t next = 0;
  std::uint64_t cancelled = 0;
  for (auto _ : state) {
    impl.add(probe, delays[next++ & (kTableSize - 1)]);
    cancelled += impl.cancel(probe) ? 1 : 0;
  }
  if (cancelled != static_cast<std::uint64_t>(state.iterations()) || impl.runs(probe) != 0) {
    state.SkipWithError("a cancel() failed or a cancelled task ran");
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace
}  // namespace timer_bench
