// What do `pending` tasks waiting 0..60 s out cost in memory: bytes_per_task, the heap bytes in
// use (malloc's own overhead per block included) and the task pool's mappings after the tasks are
// created and scheduled, minus before. The task objects are included (each implementation holds
// them its own way). Where the implementation says (the Wheel), also library_bytes_per_task:
// sizeof(TimerTask) plus the wheel's buckets per task (what the library adds to a user's task).
#pragma once

#include <cstddef>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <benchmark/benchmark.h>

#include "purgatory/timer/detail/task_pool.hpp"
#include "timer_under_test.hpp"
#include "workload.hpp"

namespace timer_bench {
namespace {

#if defined(__GLIBC__)
// Bytes of heap in use, every arena (malloc's per-block overhead included), plus the task pool's.
inline std::size_t memory_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd + purgatory::detail::pool_mapped_bytes();
}
#endif

template <TimerUnderTest Impl>
void pending_bytes(benchmark::State& state) {
#if defined(__GLIBC__)
  const auto pending = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const std::size_t before = memory_in_use();
    Impl impl(pending);
    schedule_pending(impl, pending, kCancelSpan);
    const std::size_t after = memory_in_use();
    state.counters["bytes_per_task"] =
        static_cast<double>(after - before) / static_cast<double>(pending);
    if constexpr (requires { impl.library_bytes_per_task(pending); }) {
      state.counters["library_bytes_per_task"] = impl.library_bytes_per_task(pending);
    }
  }
#else
  state.SkipWithError("PendingBytes reads glibc's mallinfo2()");
#endif
}

}  // namespace
}  // namespace timer_bench
