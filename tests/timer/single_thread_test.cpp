// Contract tests for TimerOptions::Concurrency::single_thread (timer_options.hpp, asio.hpp): what
// it needs to be built, that it keeps the timer's promises (exactly once, never early, never
// inside add()), that close() may come from another thread once the owner is done, and, in a
// build without NDEBUG, that a call from another thread aborts naming the misuse.
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <boost/asio/io_context.hpp>

#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "timer_contract_support.hpp"

#if !defined(NDEBUG) && defined(__linux__)
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#endif

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::test;

namespace {

constexpr auto kSingle = TimerOptions::Concurrency::single_thread;

std::string what_of_construction(TimerOptions options) {
  try {
    SystemTimer timer(std::move(options));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("single_thread: needs an external driver and an executor of the caller's choosing") {
  ManualClock clock;
  TimerOptions reaper;
  reaper.clock = &clock;
  reaper.executor = std::make_shared<InlineExecutor>();
  reaper.concurrency = kSingle;
  CHECK(what_of_construction(reaper).find("Driver::external") != std::string::npos);

  TimerOptions no_executor;
  no_executor.clock = &clock;
  no_executor.driver = TimerOptions::Driver::external;
  no_executor.concurrency = kSingle;
  CHECK(what_of_construction(no_executor).find("executor") != std::string::npos);

  // One base whatever `bases` says: every call comes from one thread.
  TimerOptions eight = ManualTimer::options(clock, 1ms, 20, 0, 8, kSingle);
  SystemTimer timer(eight);
  CHECK(timer.base_count() == 1);
  CHECK(timer.single_thread());
  CHECK_FALSE(SystemTimer(ManualTimer::options(clock, 1ms, 20, 0, 0,
                                               TimerOptions::Concurrency::thread_safe))
                  .single_thread());
}

TEST_CASE("single_thread: every task ends once, never early, within a tick, never inside add()") {
  ManualTimer m(1ms, 20, 0, 0, kSingle);
  std::vector<int> runs(6, 0);
  std::vector<Nanos> ran_at(6);
  std::vector<TaskRef> tasks;
  for (int i = 0; i < 6; ++i) {
    tasks.push_back(make_task([&, i] {
      ++runs[static_cast<std::size_t>(i)];
      ran_at[static_cast<std::size_t>(i)] = m.clock.now();
    }));
  }
  m.timer.add(tasks[0], 5ms);
  m.timer.add(tasks[1], 50ms);
  m.timer.add(tasks[2], 2s);  // a level up: cascaded on the way
  m.timer.add_at(tasks[3], m.clock.now() + 7ms);
  m.timer.add(tasks[4], 0ms);  // due at once: the next pass runs it
  m.timer.add(tasks[5], 30ms);
  CHECK(runs[4] == 0);
  CHECK(m.timer.size() == 6);
  CHECK(tasks[5]->cancel());
  CHECK_FALSE(tasks[5]->cancel());
  CHECK(m.timer.reschedule(*tasks[1], 20ms));  // from now: 20 ms

  m.advance(0ms);
  CHECK(runs[4] == 1);
  advance_to(m, 4ms);
  CHECK(runs[0] == 0);  // never early
  advance_to(m, 5ms);
  CHECK(runs[0] == 1);
  advance_to(m, 7ms);
  CHECK(runs[3] == 1);
  advance_to(m, 19ms);
  CHECK(runs[1] == 0);
  advance_to(m, 20ms);
  CHECK(runs[1] == 1);
  advance_to(m, 1999ms);
  CHECK(runs[2] == 0);
  advance_to(m, 2000ms);
  CHECK(runs[2] == 1);
  m.advance(10s);
  CHECK(runs == std::vector<int>{1, 1, 1, 1, 1, 0});
  CHECK(ran_at[2] == 2000ms);
  CHECK(m.timer.size() == 0);
}

TEST_CASE("single_thread: a task re-adding itself from run() waits for the next pass") {
  ManualTimer m(1ms, 20, 0, 0, kSingle);
  int runs = 0;
  TaskRef self;
  self = make_task([&] {
    if (++runs < 3) m.timer.add(self, 0ms);
  });
  m.timer.add(self, 1ms);
  m.clock.advance(1ms);
  CHECK(m.driver.advance_clock());
  CHECK(runs == 1);  // the re-add is due, but not run inside this pass
  CHECK(m.driver.advance_clock());
  CHECK(runs == 2);
  CHECK(m.driver.advance_clock());
  CHECK(runs == 3);
  CHECK(m.timer.size() == 0);
  self = nullptr;
}

TEST_CASE(
    "single_thread: close() from another thread once the owner has stopped hands back "
    "what is pending") {
  ManualTimer m(1ms, 20, 0, 0, kSingle);
  std::atomic<int> runs{0};
  std::thread owner([&] {
    for (int i = 0; i < 100; ++i)
      m.timer.add(make_task([&] { ++runs; }), Nanos{(i + 1) * 1'000'000});
    m.clock.advance(10ms);
    while (m.driver.advance_clock()) {
    }
  });
  owner.join();
  CHECK(runs == 10);
  const auto handed_back = m.timer.close();
  CHECK(handed_back.size() == 90);
  CHECK(runs == 10);
}

TEST_CASE(
    "single_thread AsioTimer: on an io_context made with concurrency hint 1, refused on one "
    "that more threads may run") {
  boost::asio::io_context shared_io;  // the default hint: any number of threads
  TimerOptions single;
  single.concurrency = kSingle;
  std::string what;
  try {
    AsioTimer refused(shared_io, single);
  } catch (const std::invalid_argument& e) {
    what = e.what();
  }
  CHECK(what.find("concurrency hint 1") != std::string::npos);

  boost::asio::io_context io(1);
  AsioTimer timer(io, single);
  CHECK(timer.single_thread());
  int runs = 0;
  int late = 0;
  const auto start = SteadyClock::instance().now();
  std::vector<TaskRef> tasks;
  for (int i = 0; i < 20; ++i) {
    const Nanos delay = std::chrono::milliseconds(i % 5);
    tasks.push_back(make_task([&, delay] {
      ++runs;
      if (SteadyClock::instance().now() - start < delay) ++late;  // early: counted as wrong
    }));
    timer.add(tasks.back(), delay);
  }
  CHECK(tasks[7]->cancel());
  io.run();  // returns once every task has run: an idle timer keeps no work alive
  CHECK(runs == 19);
  CHECK(late == 0);
  CHECK(timer.size() == 0);
}

#if !defined(NDEBUG) && defined(__linux__)
// In a child process: an owner adds, then another thread calls `call`. The child must die of
// SIGABRT with a message naming the timer and the call.
namespace {
template <class Call>
std::string abort_message_of(Call call) {
  int out[2];
  REQUIRE(pipe(out) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(out[1], 2);
    ManualTimer m(1ms, 20, 0, 0, kSingle);
    auto task = make_task([] {});
    m.timer.add(task, 5ms);
    std::thread other([&] { call(m, task); });
    other.join();
    _exit(0);  // not reached when the check works
  }
  close(out[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGABRT);
  return text;
}
}  // namespace

TEST_CASE("single_thread (a build without NDEBUG): a call from another thread aborts, naming it") {
  const std::string add =
      abort_message_of([](ManualTimer& m, const TaskRef&) { m.timer.add(make_task([] {}), 1ms); });
  CHECK(add.find("'manual'") != std::string::npos);
  CHECK(add.find("single_thread") != std::string::npos);
  CHECK(add.find("add()") != std::string::npos);
  const std::string cancel =
      abort_message_of([](ManualTimer&, const TaskRef& task) { (void)task->cancel(); });
  CHECK(cancel.find("cancel()") != std::string::npos);
  const std::string drive =
      abort_message_of([](ManualTimer& m, const TaskRef&) { (void)m.driver.advance_clock(); });
  CHECK(drive.find("advance_clock()") != std::string::npos);
}
#endif

TEST_CASE(
    "single_thread: in a suite's single_thread run (--timer-concurrency=single_thread) the timers "
    "its tests drive by hand are single-threaded, unless a test asks for a thread-safe one") {
  ManualClock clock;
  ManualTimer m;
  CHECK(m.timer.single_thread() == purgatory::test::single_thread_run());
  CHECK(SystemTimer(driven_by_hand(clock, std::make_shared<InlineExecutor>())).single_thread() ==
        purgatory::test::single_thread_run());
  ManualTimer shared(TimerOptions::Concurrency::thread_safe);
  CHECK_FALSE(shared.timer.single_thread());
}
