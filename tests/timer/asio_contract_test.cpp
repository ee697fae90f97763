// Contract tests for purgatory/timer/asio.hpp: one test per promise (docs/contracts.md).
#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/external_driver.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <boost/asio/io_context.hpp>

#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using purgatory::test::CountingTask;

namespace {

// An io_context and an AsioTimer on it.
struct OnIo {
  explicit OnIo(const char* name = "asio") : timer(io, TimerOptions{.name = name}) {}
  boost::asio::io_context io;
  purgatory::AsioTimer timer;
};

}  // namespace

TEST_CASE(
    "asio.hpp: AsioExecutor posts one handler per batch, the batch's tasks run one after the "
    "other on the io_context's thread") {
  ManualClock clock;
  boost::asio::io_context io;
  SystemTimer timer(TimerOptions{.clock = &clock,
                                 .executor = std::make_shared<AsioExecutor>(io.get_executor()),
                                 .driver = TimerOptions::Driver::external});
  ExternalDriver driver(timer);
  std::vector<int> order;
  for (int i = 0; i < 10; ++i)
    timer.add(purgatory::make_task([&order, i] { order.push_back(i); }), 1ms);
  clock.advance(1ms);
  driver.advance_clock();
  CHECK(order.empty());       // posted, not run
  CHECK(io.poll() == 1);      // one handler for the batch
  CHECK(order.size() == 10);  // all of it
  timer.add(purgatory::make_task([&order] { order.push_back(10); }), 1ms);
  clock.advance(1ms);
  driver.advance_clock();
  timer.add(purgatory::make_task([&order] { order.push_back(11); }), 1ms);
  clock.advance(1ms);
  driver.advance_clock();
  io.restart();           // poll() ran out of work and stopped the io_context
  CHECK(io.poll() == 2);  // two batches, two handlers, in order
  CHECK(order.back() == 11);
  timer.close();
}

TEST_CASE(
    "asio.hpp: AsioTimer refuses a clock that is not a SteadyClock, and an executor of the "
    "caller's, with std::invalid_argument") {
  ManualClock clock;
  boost::asio::io_context io;
  CHECK_THROWS_WITH_AS(purgatory::AsioTimer(io, TimerOptions{.clock = &clock}),
                       doctest::Contains("SteadyClock"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      purgatory::AsioTimer(
          io, TimerOptions{.executor = std::make_shared<AsioExecutor>(io.get_executor())}),
      doctest::Contains("executor"), std::invalid_argument);
}

TEST_CASE(
    "asio.hpp: AsioTimer runs on the io_context with no timer thread: 40 tasks run once, none "
    "early, on the io_context's thread, io.run() returns once nothing is pending") {
  OnIo a("drv40");
  if (const auto names = purgatory::contract::process_thread_names()) {
    CHECK(names->count("reaper-drv40") == 0);
    CHECK(names->count("exec-drv40") == 0);
  } else {
    MESSAGE("the process's threads cannot be listed here (Linux's /proc): not checking them");
  }
  std::mt19937_64 rng(23);
  struct Run {
    std::chrono::steady_clock::time_point due;
    std::chrono::steady_clock::time_point ran;
    std::thread::id on;
    int runs = 0;
  };
  std::vector<Run> runs(40);
  for (auto& r : runs) {
    const auto delay = std::chrono::microseconds(rng() % 30'000);
    r.due = std::chrono::steady_clock::now() + delay;
    a.timer.add(purgatory::make_task([&r] {
                  r.ran = std::chrono::steady_clock::now();
                  r.on = std::this_thread::get_id();
                  ++r.runs;
                }),
                delay);
  }
  const Watchdog watchdog("io.run() with a driven timer");
  a.io.run();  // returns: nothing pending keeps a wait armed
  for (const auto& r : runs) {
    CHECK(r.runs == 1);
    CHECK(r.ran >= r.due);
    CHECK(r.on == std::this_thread::get_id());
  }
}

TEST_CASE(
    "asio.hpp: an add() that brings an earlier deadline re-arms the wait, and cancelling the last "
    "task lets io.run() return by itself") {
  OnIo a;
  auto distant = purgatory::make_task<CountingTask>();
  a.timer.add(distant, 5s);
  std::thread io_thread([&] { a.io.run(); });
  std::this_thread::sleep_for(5ms);  // the driver is now waiting for the 5 s bucket
  Signal ran;
  const auto added = std::chrono::steady_clock::now();
  a.timer.add(purgatory::make_task([&] { ran.set(); }), 10ms);  // from another thread
  REQUIRE(ran.wait());
  CHECK(std::chrono::steady_clock::now() - added < 4s);  // long before the 5 s wait ended
  CHECK(distant->runs == 0);
  CHECK(distant->cancel());  // nothing pending: no wait stays armed, so io.run() returns
  io_thread.join();
}

TEST_CASE(
    "asio.hpp: the io_context may be run by several threads: 2 threads, 200 tasks, each runs "
    "once, none early") {
  OnIo a;
  std::mt19937_64 rng(29);
  std::vector<std::chrono::steady_clock::time_point> due(200);
  std::vector<std::atomic<int>> runs(200);
  std::atomic<int> early{0};
  for (std::size_t i = 0; i < due.size(); ++i) {
    const auto delay = std::chrono::microseconds(rng() % 40'000);
    due[i] = std::chrono::steady_clock::now() + delay;
    a.timer.add(purgatory::make_task([&, i] {
                  if (std::chrono::steady_clock::now() < due[i]) early.fetch_add(1);
                  runs[i].fetch_add(1);
                }),
                delay);
  }
  const Watchdog watchdog("io.run() on 2 threads");
  std::thread second([&] { a.io.run(); });
  a.io.run();
  second.join();
  for (auto& r : runs)
    CHECK(r.load() == 1);
  CHECK(early.load() == 0);
}

TEST_CASE(
    "asio.hpp: destroying the AsioTimer stops driving: io.run() is not kept busy and the pending "
    "task does not run") {
  boost::asio::io_context io;
  auto task = purgatory::make_task<CountingTask>();
  {
    purgatory::AsioTimer timer(io);
    timer.add(task, 2s);
    io.poll();  // the driver armed its wait for 2 s
  }
  const auto started = std::chrono::steady_clock::now();
  io.restart();
  io.run();  // the armed wait is cancelled: returns without waiting for the task
  CHECK(std::chrono::steady_clock::now() - started < 1500ms);
  CHECK(task->runs == 0);
  CHECK_FALSE(task->is_pending());  // handed back by the timer's close()
}
