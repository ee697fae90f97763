// snapshot_bench: what does a live view (demo_broker --ui) cost the purgatory's hot path?
//
// DelayedOperationPurgatory::snapshot() and SystemTimer::wheel_snapshot() record nothing on the
// watch/complete paths: they only read, under the locks those paths already take. So the cost to
// measure is (a) the hot path when nobody ever calls them and (b) the same path while a viewer
// takes both snapshots 10 times a second (the page polls 4 times a second), plus (c) what one
// snapshot itself costs.
//
//   BM_WatchComplete/<pending>/<viewer>  one operation watched on one of 1000 keys and then
//       force-completed, with <pending> others waiting (1 s timeout, set up untimed) on the same
//       keys; viewer=0: no snapshot is ever taken, viewer=1: a thread takes snapshot({64, 16})
//       and wheel_snapshot(2) every 100 ms, viewer=2: the same thread waking every 100 ms but
//       taking no snapshot (the control: what a second thread alone costs, e.g. the atomic
//       reference counts glibc/libstdc++ skip while a process has a single thread).
//   BM_Snapshot/<pending>     one snapshot({64, 16}) of a purgatory holding <pending> operations.
//   BM_WheelSnapshot/<pending> one wheel_snapshot(2) of its timer.
//
// Compare BM_WatchComplete/N/0 with /N/1, and /N/0 with the same benchmark built before the
// snapshot API existed (the report in docs/live-view.md gives both).
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "purgatory/delayed_operation_purgatory.hpp"

namespace {

using namespace std::chrono_literals;
using Purgatory = purgatory::DelayedOperationPurgatory<int>;

struct Fixture {
  explicit Fixture(std::int64_t pending) {
    purgatory::TimerOptions timer;
    timer.executor = std::make_shared<purgatory::InlineExecutor>();
    timer.driver = purgatory::TimerOptions::Driver::external;
    purgatory::PurgatoryOptions options;
    options.timer = timer;
    options.shards = 16;
    p = std::make_unique<Purgatory>(options);
    for (std::int64_t i = 0; i < pending; ++i) {
      waiting.push_back(purgatory::make_operation(
          1h, [] { return false; }, [] {}));
      p->try_complete_else_watch(waiting.back(), {static_cast<int>(i % kKeys)});
    }
  }
  ~Fixture() { p->shutdown(); }
  static constexpr int kKeys = 1000;
  std::unique_ptr<Purgatory> p;
  std::vector<purgatory::OperationRef> waiting;
};

void BM_WatchComplete(benchmark::State& state) {
  Fixture f(state.range(0));
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> snapshots{0};
  std::thread viewer;
  if (state.range(1) != 0) {
    viewer = std::thread([&] {
      while (!stop.load()) {
        if (state.range(1) == 1) {
          benchmark::DoNotOptimize(f.p->snapshot(purgatory::SnapshotLimits{64, 16}));
          benchmark::DoNotOptimize(f.p->timer().wheel_snapshot(2));
          snapshots.fetch_add(1);
        }
        std::this_thread::sleep_for(100ms);
      }
    });
  }
  int key = 0;
  for (auto _ : state) {
    auto op = purgatory::make_operation(
        1s, [] { return false; }, [] {});
    f.p->try_complete_else_watch(op, {key});
    op->force_complete();
    key = (key + 1) % Fixture::kKeys;
  }
  stop = true;
  if (viewer.joinable()) viewer.join();
  state.counters["snapshots"] = static_cast<double>(snapshots.load());
}
BENCHMARK(BM_WatchComplete)
    ->ArgsProduct({{1000, 100000}, {0, 1, 2}})
    ->ArgNames({"pending", "viewer"})
    ->MinTime(1.0)
    ->UseRealTime();

void BM_Snapshot(benchmark::State& state) {
  Fixture f(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.p->snapshot(purgatory::SnapshotLimits{64, 16}));
  }
}
BENCHMARK(BM_Snapshot)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void BM_WheelSnapshot(benchmark::State& state) {
  Fixture f(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.p->timer().wheel_snapshot(2));
  }
}
BENCHMARK(BM_WheelSnapshot)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
