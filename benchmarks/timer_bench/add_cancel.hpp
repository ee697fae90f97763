// How fast is add+cancel with `pending` tasks waiting: a request whose timeout is met.
//
//   AddCancel   `pending` tasks wait 0..60 s out (set up untimed). Each iteration schedules one
//               more task 0..60 s out and cancels it.
//   AddAtCancel the same with absolute deadlines, as a server computes them from a time it read
//               once (when the request arrived, or once per event-loop pass: here once per round
//               of kRound iterations, for every implementation): Wheel add_at(), Asio
//               expires_at(), the others their deadline directly. No clock read per add.
#pragma once

#include <cstddef>
#include <cstdint>

#include <benchmark/benchmark.h>

#include "timer_under_test.hpp"
#include "workload.hpp"

namespace timer_bench {
namespace {

// kAbsolute: AddAtCancel (deadlines from a time read once per round), else AddCancel.
template <TimerUnderTest Impl, bool kAbsolute = false>
void add_cancel(benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  Impl impl(pending + 1);
  schedule_pending(impl, pending, kCancelSpan);
  const std::size_t probe = pending;  // the one task added and cancelled, reused
  const auto delays = random_delays(kTableSize, kCancelSpan);
  std::size_t next = 0;
  std::uint64_t cancelled = 0;
  std::int64_t round_now = 0;
  auto body = [&] {
    const Nanos delay = delays[next++ & (kTableSize - 1)];
    if constexpr (kAbsolute) {
      if ((next & (kRound - 1)) == 1) round_now = now_ns();
      impl.add_at(probe, round_now + delay.count());
    } else {
      impl.add(probe, delay);
    }
    cancelled += impl.cancel(probe) ? 1 : 0;
  };
  impl.loop(state, body);

  const auto iterations = static_cast<std::uint64_t>(state.iterations());
  if (cancelled != iterations || impl.runs(probe) != 0) {
    state.SkipWithError("a cancel() failed or a cancelled task ran");
  }
  if constexpr (requires { impl.aborted(); }) {
    if (impl.aborted() != iterations) state.SkipWithError("an aborted handler did not run");
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace
}  // namespace timer_bench
