// timer_bench: how fast are add+cancel and add+expire with many tasks pending, for our timer and
// for what a C++ user would otherwise pick? All four run side by side, with the same payload.
//
// Benchmarks are named BM_<Impl>_<Workload>/<pending>. The implementations, each in a file of its
// own behind timer_under_test.hpp:
//   Wheel            purgatory::SystemTimer (wheel.hpp)
//   WheelSingleThread the same, TimerOptions::Concurrency::single_thread: no lock (wheel.hpp)
//   AsioSteadyTimer  one boost::asio::steady_timer per task on one io_context
//   (asio_steady_timer.hpp) StdMultimap      std::multimap<deadline, task*> (std_multimap.hpp)
//   HeapLazyCancel   a binary heap with tombstones, purged as Go's timers do (heap_lazy_cancel.hpp)
// The workloads (the argument is the number of pending tasks), each a question of its own:
//   AddCancel, AddAtCancel        add_cancel.hpp
//   AddExpire                     add_expire.hpp
//   Readd, Reschedule, CancelAdd  move_pending.hpp (Wheel only)
//   PendingBytes                  pending_bytes.hpp (memory, not time)
//   AddCancelThreads              add_cancel_threads.hpp (Wheel and Asio, 1 and 2 threads)
//
// Why it is fair: every implementation reads steady_clock once per add (once per round of kRound
// adds in AddAtCancel) and once per expiry round, runs the same payload (the task counts its
// runs), and reuses its task objects across iterations, so allocation is charged only where the
// structure itself allocates (multimap nodes, Asio's handler ops). Asio's loop runs in handlers on
// its io_context's own thread, as a server's would (asio_steady_timer.hpp). Every benchmark checks
// that each task ran exactly once per round, or never when cancelled, and reports an error
// otherwise.
//
// The registrations below are in the order the benchmarks run and are listed.

#include <thread>

#include <benchmark/benchmark.h>

#include "add_cancel.hpp"
#include "add_cancel_threads.hpp"
#include "add_expire.hpp"
#include "asio_steady_timer.hpp"
#include "heap_lazy_cancel.hpp"
#include "move_pending.hpp"
#include "pending_bytes.hpp"
#include "std_multimap.hpp"
#include "wheel.hpp"

namespace {

using timer_bench::AsioImpl;
using timer_bench::HeapImpl;
using timer_bench::Move;
using timer_bench::MultimapImpl;
using timer_bench::WheelImpl;
using timer_bench::WheelSingleThreadImpl;

// Every benchmark runs in a multi-threaded process, as in any server (a SystemTimer with default
// options starts two threads). glibc skips the atomic instructions of a mutex while a process has
// never started a thread (__libc_single_threaded), so otherwise the benchmarks that happen to run
// before the first thread is started (the 1-thread AddCancelThreads, or any run with a filter)
// would measure uncontended locks without them: about 37% faster add+cancel, for every
// implementation that locks.
const bool kProcessIsMultiThreaded = [] {
  std::thread([] {}).join();
  return true;
}();

#define PURGATORY_THREADS_BENCH(Impl, Name)                    \
  void BM_##Name##_AddCancelThreads(benchmark::State& state) { \
    timer_bench::add_cancel_threads<Impl>(state);              \
  }                                                            \
  BENCHMARK(BM_##Name##_AddCancelThreads)                      \
      ->Arg(1000000)                                           \
      ->Setup(timer_bench::shared_setup<Impl>)                 \
      ->Teardown(timer_bench::shared_teardown<Impl>)           \
      ->Threads(1)                                             \
      ->Threads(2)                                             \
      ->UseRealTime()                                          \
      ->MinTime(1.0)                                           \
      ->Unit(benchmark::kNanosecond)

PURGATORY_THREADS_BENCH(WheelImpl, Wheel);
PURGATORY_THREADS_BENCH(AsioImpl, AsioSteadyTimer);

// AddCancel, Readd and Reschedule find their iteration count as usual; AddExpire's are fixed
// (add_expire.hpp).
void cancel_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kNanosecond);
}

#define PURGATORY_TIMER_BENCH(Impl, Name)                                                      \
  void BM_##Name##_AddCancel(benchmark::State& state) {                                        \
    timer_bench::add_cancel<Impl>(state);                                                      \
  }                                                                                            \
  BENCHMARK(BM_##Name##_AddCancel)->Apply(cancel_sizes);                                       \
  void BM_##Name##_AddAtCancel(benchmark::State& state) {                                      \
    timer_bench::add_cancel<Impl, /*kAbsolute=*/true>(state);                                  \
  }                                                                                            \
  BENCHMARK(BM_##Name##_AddAtCancel)->Apply(cancel_sizes);                                     \
  void BM_##Name##_AddExpire(benchmark::State& state) {                                        \
    timer_bench::add_expire<Impl>(state);                                                      \
  }                                                                                            \
  BENCHMARK(BM_##Name##_AddExpire)->Arg(1000)->Iterations(20)->Unit(benchmark::kNanosecond);   \
  BENCHMARK(BM_##Name##_AddExpire)->Arg(100000)->Iterations(5)->Unit(benchmark::kNanosecond);  \
  BENCHMARK(BM_##Name##_AddExpire)->Arg(1000000)->Iterations(3)->Unit(benchmark::kNanosecond); \
  void BM_##Name##_PendingBytes(benchmark::State& state) {                                     \
    timer_bench::pending_bytes<Impl>(state);                                                   \
  }                                                                                            \
  BENCHMARK(BM_##Name##_PendingBytes)->Arg(1000000)->Iterations(1)->Unit(benchmark::kMillisecond)

PURGATORY_TIMER_BENCH(WheelImpl, Wheel);
PURGATORY_TIMER_BENCH(WheelSingleThreadImpl, WheelSingleThread);
PURGATORY_TIMER_BENCH(AsioImpl, AsioSteadyTimer);
PURGATORY_TIMER_BENCH(MultimapImpl, StdMultimap);
PURGATORY_TIMER_BENCH(HeapImpl, HeapLazyCancel);

void BM_Wheel_Readd(benchmark::State& state) {
  timer_bench::move_pending<WheelImpl, Move::readd>(state);
}
BENCHMARK(BM_Wheel_Readd)->Apply(cancel_sizes);
void BM_Wheel_Reschedule(benchmark::State& state) {
  timer_bench::move_pending<WheelImpl, Move::reschedule>(state);
}
BENCHMARK(BM_Wheel_Reschedule)->Apply(cancel_sizes);
void BM_Wheel_CancelAdd(benchmark::State& state) {
  timer_bench::move_pending<WheelImpl, Move::cancel_add>(state);
}
BENCHMARK(BM_Wheel_CancelAdd)->Apply(cancel_sizes);

}  // namespace

BENCHMARK_MAIN();
