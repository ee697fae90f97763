// timer/executor.hpp's promise about the claim racing cancel(), tested on the hooked timer at its
// named race points. The rest of the header's promises: tests/timer/executor_test.cpp.
#include "purgatory/timer/executor.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "race_schedule.hpp"
#include "threads.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "executor.hpp: the claim decides between run_all() and cancel(): a cancel() just before it "
    "returns true and the task does not run, one just after returns false and the run happens") {
  for (const ClaimSide c : kClaimSides) {
    INFO(c.point);
    auto stash = std::make_shared<StashExecutor>();
    Timed t(stash);
    auto task = purgatory::make_task<CountingTask>();
    t.timer.add(task, 1ms);
    t.advance(1ms);
    bool cancelled = !c.before_claim;
    RaceSchedule schedule(RaceSchedule::at_first(
        c.point, [&] { on_another_thread([&] { cancelled = task->cancel(); }); }));
    stash->run_all();
    CHECK(cancelled == c.before_claim);
    CHECK(task->runs == (c.before_claim ? 0 : 1));
    CHECK(schedule.hits(c.point) == 1);
  }
}
