// Contract tests for purgatory/timer/system_timer.hpp, second part: close(), drain() and the
// destructor (the README's "exactly one outcome per schedule" with close() included).
#include "purgatory/timer/system_timer.hpp"

#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/periodic_task.hpp"
#include "thread_slot.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

namespace {

std::optional<TimerRejected::Reason> add_refused(SystemTimer& timer) {
  auto probe = purgatory::make_task<CountingTask>();
  try {
    timer.add(probe, 1h);
  } catch (const TimerRejected& e) {
    return e.reason();
  }
  probe->cancel();
  return std::nullopt;
}

// Moves a ManualClock 1 ms every 100 us of real time until stopped (drain() needs time to pass).
struct ClockMover {
  explicit ClockMover(ManualClock& clock)
      : thread([this, &clock] {
          while (!stop.load()) {
            std::this_thread::sleep_for(100us);
            clock.advance(1ms);
          }
        }) {}
  ~ClockMover() {
    stop = true;
    thread.join();
  }
  std::atomic<bool> stop{false};
  std::thread thread;
};

}  // namespace

TEST_CASE(
    "system_timer.hpp: close() hands back every scheduled task (none runs, none is pending), "
    "refuses adds with Reason::closed, and later calls return an empty vector") {
  ManualTimer m;
  std::set<const TimerTask*> added;
  std::vector<purgatory::Ref<CountingTask>> tasks;
  for (int i = 0; i < 10; ++i) {
    tasks.push_back(purgatory::make_task<CountingTask>());
    m.timer.add(tasks.back(), std::chrono::milliseconds(1 + i * 40));  // several levels
    added.insert(tasks.back().get());
  }
  const auto handed_back = m.timer.close();
  std::set<const TimerTask*> back;
  for (const auto& t : handed_back)
    back.insert(t.get());
  CHECK(back == added);
  CHECK(m.timer.is_closed());
  CHECK(m.timer.size() == 0);
  m.clock.advance(1s);
  CHECK_FALSE(m.driver.advance_clock(Nanos::zero()));
  for (const auto& t : tasks) {
    CHECK(t->runs == 0);
    CHECK_FALSE(t->is_pending());
    CHECK_FALSE(t->cancel());
  }
  CHECK(m.timer.close().empty());
  CHECK(add_refused(m.timer) == TimerRejected::Reason::closed);
  try {
    m.timer.add_at(tasks[0], 1h);
    FAIL("add_at() after close() must throw");
  } catch (const TimerRejected& e) {
    CHECK(e.reason() == TimerRejected::Reason::closed);
    CHECK(std::string(e.what()).find("close()") != std::string::npos);
  }
}

TEST_CASE("system_timer.hpp: close() stops the reaper thread and the timer's own executor") {
  if (!purgatory::contract::process_thread_names()) {
    MESSAGE("the process's threads cannot be listed here (Linux's /proc): nothing to check");
    return;
  }
  auto count = [](const std::string& name) {
    return purgatory::contract::process_thread_names()->count(name);
  };
  SystemTimer timer(TimerOptions{.name = "stopme"});
  CHECK(count("reaper-stopme") == 1);
  CHECK(count("exec-stopme") == 1);
  timer.close();
  CHECK(count("reaper-stopme") == 0);
  CHECK(count("exec-stopme") == 0);
}

TEST_CASE(
    "system_timer.hpp: the destructor closes the timer and drops the handed-back tasks: none "
    "runs, each is released") {
  std::atomic<bool> dropped{false};
  auto kept = purgatory::make_task<CountingTask>();
  {
    ManualTimer m;
    m.timer.add(purgatory::make_task<Tracked>(
                    dropped, [] { FAIL("a task pending at destruction must not run"); }),
                5ms);  // fire and forget
    m.timer.add(kept, 5ms);
    CHECK(kept->use_count() == 2);
  }
  CHECK(dropped.load());
  CHECK(kept->use_count() == 1);
  CHECK_FALSE(kept->is_pending());
  CHECK(kept->runs == 0);
}

TEST_CASE(
    "system_timer.hpp: drain() refuses adds with Reason::draining, cancels periodic tasks, waits "
    "until every pending task has run, then closes, nothing is handed back") {
  DrivenTimer<InlineExecutor> m({.name = "drain"});
  auto beat = purgatory::make_periodic([] {});
  beat->start(m.timer, 1ms, 2ms, PeriodicTask::Mode::fixed_rate);
  for (int i = 0; i < 6; ++i)
    m.step(1ms);
  REQUIRE(beat->run_count() == 3);
  std::vector<purgatory::Ref<CountingTask>> tasks;
  for (int i = 0; i < 30; ++i) {
    tasks.push_back(purgatory::make_task<CountingTask>());
    m.timer.add(tasks.back(), std::chrono::milliseconds(1 + i));
  }
  std::optional<TimerRejected::Reason> refused;
  m.timer.add(purgatory::make_task([&] { refused = add_refused(m.timer); }), 10ms);
  std::vector<TaskRef> handed_back;
  {
    const ClockMover mover(m.clock);  // drain() advances the timer itself; time must pass
    handed_back = m.timer.drain();
  }
  CHECK(handed_back.empty());
  for (const auto& t : tasks)
    CHECK(t->runs == 1);
  CHECK(refused == TimerRejected::Reason::draining);
  CHECK(beat->run_count() == 3);  // cancelled: no run during the drain
  CHECK_FALSE(beat->is_pending());
  CHECK(m.timer.is_closed());
  CHECK(add_refused(m.timer) == TimerRejected::Reason::closed);
}

TEST_CASE(
    "system_timer.hpp: drain(max_wait) returns the tasks not due when the wait ended: they never "
    "run and are no longer pending") {
  DrivenTimer<InlineExecutor> m;
  auto soon = purgatory::make_task<CountingTask>();
  auto late = purgatory::make_task<CountingTask>();
  m.timer.add(soon, 5ms);
  m.timer.add(late, 1h);
  std::vector<TaskRef> handed_back;
  {
    const ClockMover mover(m.clock);
    handed_back = m.timer.drain(10ms);
  }
  CHECK(soon->runs == 1);
  REQUIRE(handed_back.size() == 1);
  CHECK(handed_back[0].get() == late.get());
  CHECK_FALSE(late->is_pending());
  m.step(2h);
  CHECK(late->runs == 0);
}

TEST_CASE(
    "system_timer.hpp: drain() works with any driver: with the reaper on the real clock it "
    "returns once the last task ran") {
  SystemTimer timer(TimerOptions{.name = "drain-real"});
  std::atomic<int> ran{0};
  for (const auto d : {0ms, 5ms, 10ms, 20ms})
    timer.add(purgatory::make_task([&] { ran.fetch_add(1); }), d);
  const auto started = std::chrono::steady_clock::now();
  const auto handed_back = timer.drain(10s);
  CHECK(handed_back.empty());
  CHECK(ran.load() == 4);
  CHECK(std::chrono::steady_clock::now() - started >= 19ms);
}
