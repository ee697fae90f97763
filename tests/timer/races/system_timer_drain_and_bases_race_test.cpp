// Regressions of drain() that need the hooked timer's race points: drain() waits for the tasks
// handed to the executor. Each fails with its fix reverted. The other regressions of drain() and
// the bases: tests/timer/system_timer_drain_and_bases_test.cpp.
#include "purgatory/timer/system_timer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "contract_support.hpp"
#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/periodic_task.hpp"
#include "race_schedule.hpp"
#include "thread_slot.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

using contract::Signal;

constexpr const char* kDrainWaitsForExecutor =
    "SystemTimer::drain: the wheels are empty, tasks handed to the executor not yet run";

// 100 tasks due at 2 ms, each held at a gate until drain() is waiting for the executor, then
// drain(5 s) with the clock already at 2 ms: it must return only once all 100 have run.
// `finish` runs what the executor still holds (before the fix: all of it) before the test ends.
void drain_waits_for(const std::shared_ptr<Executor>& executor,
                     const std::function<void()>& finish) {
  ManualClock clock;
  Signal gate;
  std::atomic<int> ran{0};
  RaceSchedule schedule(
      {.pause_probability = 0, .actions = {{kDrainWaitsForExecutor, [&] { gate.set(); }}}});
  SystemTimer timer(
      driven_by_hand(clock, executor, {.name = "drain", .tick = 1ms, .wheel_size = 20}));
  for (int i = 0; i < 100; ++i) {
    timer.add(make_task([&] {
                (void)gate.wait();
                ran.fetch_add(1);
              }),
              2ms);
  }
  clock.advance(2ms);
  const std::vector<TaskRef> handed_back = timer.drain(5s);
  const int ran_at_return = ran.load();
  gate.set();  // before the fix drain() returned at once: let the executor finish
  finish();
  CHECK(handed_back.empty());
  CHECK(ran_at_return == 100);
  CHECK(schedule.hits(kDrainWaitsForExecutor) > 0);
}

TEST_CASE(
    "regression: drain() returns only once every task handed to a ThreadExecutor "
    "the caller made has run") {
  auto executor = std::make_shared<ThreadExecutor>("drain-exec");
  drain_waits_for(executor, [&] { executor->shutdown(); });
}

TEST_CASE(
    "regression: drain() returns only once every task posted to an AsioExecutor has "
    "run") {
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  drain_waits_for(std::make_shared<AsioExecutor>(io.get_executor()), [&] {
    work.reset();
    runner.join();
  });
}

}  // namespace
}  // namespace purgatory::test
