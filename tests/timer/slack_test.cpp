// Contract tests for SystemTimer::add(task, delay, slack) and add_at(task, deadline, slack)
// (system_timer.hpp): never early, at most the slack late, rounded to the coarsest level tick
// that fits, and left in that level's bucket until it runs (never cascaded to a finer level).
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::test;

namespace {

// A task that records when it ran.
struct Stamp {
  int runs = 0;
  Nanos at{-1};
};

TaskRef stamping(ManualTimer& m, Stamp& s) {
  return make_task([&m, &s] {
    ++s.runs;
    s.at = m.clock.now();
  });
}

}  // namespace

TEST_CASE(
    "add with slack: runs at the deadline rounded up to the coarsest level tick within half the "
    "slack (1 ms x 20: a 125 ms slack rounds to 20 ms, a 39 ms one to nothing), never before the "
    "deadline") {
  ManualTimer m;  // 1 ms x 20: level ticks 1, 20, 400 ms
  m.advance(3ms);
  Stamp s;
  m.timer.add(stamping(m, s), 1000ms, 125ms);  // deadline 1003 ms -> 1020 ms
  advance_to(m, 1019ms);
  CHECK(s.runs == 0);
  advance_to(m, 1020ms);
  CHECK(s.runs == 1);
  CHECK(s.at == 1020ms);

  // A slack of 800 ms or more rounds to 400 ms; below 40 ms (twice tick x wheel_size) it changes
  // nothing: the other half of a slack is the time to run the bucket's other tasks.
  Stamp coarse, exact;
  m.timer.add(stamping(m, coarse), 1000ms, 900ms);  // 2020 -> 2400 ms
  m.timer.add(stamping(m, exact), 1000ms, 39ms);    // 2020 ms, as add() alone
  advance_to(m, 2020ms);
  CHECK(exact.runs == 1);
  CHECK(exact.at == 2020ms);
  advance_to(m, 2399ms);
  CHECK(coarse.runs == 0);
  advance_to(m, 2400ms);
  CHECK(coarse.at == 2400ms);
}

TEST_CASE(
    "add with slack: the task waits in the coarse bucket it was rounded to, never moved to a "
    "finer level, while an exact one is cascaded down") {
  ManualTimer m;
  m.advance(3ms);
  Stamp slack, exact;
  // Deadline 303 ms: with 50 ms of slack, 320 ms, the start of a level-1 (20 ms) bucket.
  m.timer.add(stamping(m, slack), 300ms, 50ms);
  m.timer.add(stamping(m, exact), 300ms);
  CHECK(m.timer.size_per_level() == std::vector<std::size_t>{0, 2});
  advance_to(m, 302ms);
  // The exact task was moved to level 0 ahead of time; the one with slack stays in level 1.
  CHECK(m.timer.size_per_level() == std::vector<std::size_t>{1, 1});
  advance_to(m, 303ms);
  CHECK(exact.runs == 1);
  advance_to(m, 319ms);
  CHECK(slack.runs == 0);
  CHECK(m.timer.size_per_level() == std::vector<std::size_t>{0, 1});
  advance_to(m, 320ms);
  CHECK(slack.runs == 1);
  CHECK(slack.at == 320ms);
  CHECK(m.timer.size() == 0);
}

TEST_CASE(
    "add with slack: from a level above, cascaded down once, to the level it was rounded "
    "to, and no further") {
  ManualTimer m;
  m.advance(3ms);
  Stamp s;
  m.timer.add(stamping(m, s), 1000ms, 125ms);  // 1020 ms: level 2 at first (past 400 ms)
  CHECK(m.timer.size_per_level() == std::vector<std::size_t>{0, 0, 1});
  advance_to(m, 1019ms);
  CHECK(m.timer.size_per_level() == std::vector<std::size_t>{0, 1, 0});
  advance_to(m, 1020ms);
  CHECK(s.runs == 1);
}

TEST_CASE(
    "add with slack: cancel(), re-add and reschedule() of a task waiting in a coarse bucket") {
  ManualTimer m;
  Stamp a, b;
  const TaskRef ta = stamping(m, a);
  const TaskRef tb = stamping(m, b);
  m.timer.add(ta, 300ms, 50ms);  // 300 ms, a level-1 bucket's start
  m.timer.add(tb, 300ms, 50ms);
  CHECK(ta->cancel());
  CHECK_FALSE(ta->cancel());
  m.timer.add(tb, 50ms, 10ms);  // moved: 50 ms, exact (10 ms < 40 ms)
  advance_to(m, 50ms);
  CHECK(b.runs == 1);
  CHECK(b.at == 50ms);
  m.timer.add(ta, 100ms, 60ms);          // 150 ms -> 160 ms
  CHECK(m.timer.reschedule(*ta, 10ms));  // reschedule() is exact: 60 ms
  advance_to(m, 400ms);
  CHECK(a.runs == 1);
  CHECK(a.at == 60ms);
  CHECK(m.timer.size() == 0);
}

TEST_CASE(
    "add_at with slack: an absolute deadline, rounded the same way, and a negative slack is "
    "refused, naming it") {
  ManualTimer m;
  Stamp s;
  m.timer.add_at(stamping(m, s), 507ms, 100ms);  // -> 520 ms
  advance_to(m, 519ms);
  CHECK(s.runs == 0);
  advance_to(m, 520ms);
  CHECK(s.at == 520ms);
  std::string what;
  try {
    m.timer.add(make_task([] {}), 10ms, -1ms);
  } catch (const std::invalid_argument& e) {
    what = e.what();
  }
  CHECK(what.find("slack") != std::string::npos);
  CHECK(m.timer.size() == 0);
}
