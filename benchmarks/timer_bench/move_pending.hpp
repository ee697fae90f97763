// How fast does a scheduled task move to a new deadline (the Wheel only): one of `pending`
// scheduled tasks, round robin, moves 0..60 s out.
//   Readd       by adding it again: Kafka's "adding again moves it".
//   Reschedule  through SystemTimer::reschedule(), in place.
//   CancelAdd   as cancel() then add(): the cost Reschedule must not exceed.
#pragma once

#include <cstddef>
#include <cstdint>

#include <benchmark/benchmark.h>

#include "timer_under_test.hpp"
#include "workload.hpp"

namespace timer_bench {
namespace {

enum class Move { readd, reschedule, cancel_add };

template <TimerUnderTest Impl, Move kHow>
void move_pending(benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  Impl impl(pending);
  schedule_pending(impl, pending, kCancelSpan);
  const auto delays = random_delays(kTableSize, kCancelSpan);
  std::size_t next = 0;
  std::size_t task = 0;
  std::uint64_t moved = 0;
  auto body = [&] {
    const Nanos delay = delays[next++ & (kTableSize - 1)];
    if constexpr (kHow == Move::reschedule) {
      moved += impl.reschedule(task, delay) ? 1 : 0;
    } else if constexpr (kHow == Move::cancel_add) {
      moved += impl.cancel(task) ? 1 : 0;
      impl.add(task, delay);
    } else {
      impl.add(task, delay);
      ++moved;
    }
    if (++task == pending) task = 0;
  };
  impl.loop(state, body);
  bool ok = moved == static_cast<std::uint64_t>(state.iterations());
  for (std::size_t i = 0; i < pending; ++i)
    ok = ok && impl.runs(i) == 0;
  if (!ok) state.SkipWithError("a move failed or a moved task ran");
  state.SetItemsProcessed(state.iterations());
}

}  // namespace
}  // namespace timer_bench
