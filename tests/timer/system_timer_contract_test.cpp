// Contract tests for purgatory/timer/system_timer.hpp: deadlines, threads, options, errors of the
// constructor, thread-safety. The add path, reschedule() and the drivers have files of their own
// (system_timer_*_contract_test.cpp); close() and drain() are in
// system_timer_shutdown_contract_test.cpp.
#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "system_timer.hpp: a task never runs before its deadline, and at most one tick after it "
    "(tick 10 ms, 300 deadlines at nanosecond resolution over 3 levels)") {
  ManualTimer m(10ms, 20);
  std::mt19937_64 rng(5);
  struct Due {
    Nanos deadline;
    Nanos ran{-1};
  };
  std::vector<Due> due(300);
  std::vector<TaskRef> tasks;
  for (std::size_t i = 0; i < due.size(); ++i) {
    tasks.push_back(purgatory::make_task([&, i] { due[i].ran = m.clock.now(); }));
  }
  std::size_t next = 0;
  for (int step = 0; step < 8000; ++step) {
    if (step < 2000 && step % 6 == 0 && next < due.size()) {
      const Nanos delay{static_cast<Nanos::rep>(rng() % 5'000'000'000ULL)};  // up to 5 s
      due[next].deadline = m.clock.now() + delay;
      m.timer.add(tasks[next], delay);
      ++next;
    }
    m.advance(1ms);
  }
  REQUIRE(next == due.size());
  for (const Due& d : due) {
    REQUIRE(d.ran >= Nanos::zero());
    CHECK(d.ran >= d.deadline);
    CHECK(d.ran < d.deadline + 10ms + 1ms);  // one tick, plus the test's 1 ms step
  }
  CHECK(m.timer.size_per_level().size() >= 3);
}

TEST_CASE(
    "system_timer.hpp: with nothing pending the reaper sleeps without any wake-up, an add() wakes "
    "it, and the clock jumps to the next bucket instead of ticking") {
  SystemTimer timer(TimerOptions{.name = "idle"});  // real clock, reaper thread, 1 ms tick
  std::this_thread::sleep_for(100ms);
  CHECK(timer.wakeups() == 0);  // idle: no wake-up at all
  Signal ran;
  const auto added = std::chrono::steady_clock::now();
  timer.add(purgatory::make_task([&] { ran.set(); }), 150ms);
  REQUIRE(ran.wait());
  CHECK(std::chrono::steady_clock::now() - added >= 150ms);
  // 150 ticks went by; the reaper woke for the add, for the (cascaded) buckets and maybe a
  // spurious wake-up, not once per tick.
  CHECK(timer.wakeups() <= 10);
  const std::uint64_t after = timer.wakeups();
  std::this_thread::sleep_for(50ms);
  CHECK(timer.wakeups() == after);  // idle again
  timer.close();
}

TEST_CASE(
    "system_timer.hpp: by default expired tasks run on a thread the timer owns, not the caller's, "
    "TimerOptions::name names the reaper and executor threads") {
  SystemTimer timer(TimerOptions{.name = "named"});
  std::string ran_on;
  Signal ran;
  timer.add(purgatory::make_task([&] {
              ran_on = purgatory::contract::thread_name();
              ran.set();
            }),
            1ms);
  REQUIRE(ran.wait());
  CHECK(ran_on.find("named") != std::string::npos);
  CHECK(ran_on != "reaper-named");
  CHECK(purgatory::contract::thread_name().find("named") == std::string::npos);
  timer.close();
}

TEST_CASE(
    "system_timer.hpp: the constructor throws std::invalid_argument naming a tick <= 0 or above "
    "one day, or a wheel_size outside [2, 65536]") {
  auto make = [](Nanos tick, int wheel_size) {
    SystemTimer t(TimerOptions{
        .tick = tick, .wheel_size = wheel_size, .driver = TimerOptions::Driver::external});
  };
  CHECK_THROWS_WITH_AS(make(0ns, 20), doctest::Contains("0 ns"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(-4ms, 20), doctest::Contains("-4000000"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(24h + 1ns, 20), doctest::Contains("86400000000001"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(1ms, 1), doctest::Contains("got 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(1ms, 65537), doctest::Contains("65537"), std::invalid_argument);
  CHECK_NOTHROW(make(1ns, 2));
  CHECK_NOTHROW(make(24h, 65536));
}

TEST_CASE(
    "system_timer.hpp: on_task_error receives what a task throws, with none, the error is "
    "printed to stderr naming the timer, and the timer keeps running") {
  ManualClock clock;
  StderrCapture err;
  {
    SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>(), {.name = "loud"}));
    ExternalDriver driver(timer);
    timer.add(purgatory::make_task([] { throw std::runtime_error("disk on fire"); }), 1ms);
    auto after = purgatory::make_task<CountingTask>();
    timer.add(after, 2ms);
    clock.advance(2ms);
    driver.advance_clock();
    CHECK(after->runs == 1);
  }
  const std::string printed = err.text();
  CHECK(printed.find("loud") != std::string::npos);
  CHECK(printed.find("disk on fire") != std::string::npos);
}
