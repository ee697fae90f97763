// PeriodicTask's cancel() and fixed-rate promises that once did not hold: each test fails with
// its fix reverted.
#include "purgatory/timer/periodic_task.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "threads.hpp"
#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::Nanos;
using purgatory::PeriodicTask;
using namespace purgatory::test;

TEST_CASE(
    "regression: PeriodicTask fixed rate: a run lasting exactly one period is "
    "followed by the run due at first_deadline + k * period, not a period later") {
  ManualTimer m;
  std::vector<Nanos> at;
  auto task = purgatory::make_periodic([&] {
    at.push_back(m.clock.now());
    if (at.size() == 1) m.clock.advance(10ms);  // the first run lasts exactly one period
  });
  task->start(m.timer, 10ms, 10ms, PeriodicTask::Mode::fixed_rate);
  while (m.clock.now() < 40ms)
    m.advance(1ms);
  CHECK(at == std::vector<Nanos>{10ms, 20ms, 30ms, 40ms});
  task->cancel();
}
