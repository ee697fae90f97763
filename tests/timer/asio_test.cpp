// Tests of purgatory/timer/asio.hpp: AsioTimer and AsioExecutor, one test per promise
// (docs/contracts.md).
#include "purgatory/timer/asio.hpp"

#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/async.hpp"
#include "purgatory/timer/external_driver.hpp"
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

namespace {

using namespace std::chrono_literals;
using purgatory::AsioTimer;
using purgatory::make_task;
using Clock = std::chrono::steady_clock;

// io.run_for(limit) returned because the io_context ran out of work (not because the limit passed).
bool ran_out_of_work(boost::asio::io_context& io, std::chrono::seconds limit,
                     Clock::duration* took = nullptr) {
  const auto start = Clock::now();
  (void)io.run_for(limit);
  if (took != nullptr) *took = Clock::now() - start;
  return io.stopped();
}

TEST_CASE("AsioTimer: tasks run on the io_context's thread, at or after their deadline") {
  boost::asio::io_context io;
  AsioTimer timer(io);
  const auto io_thread = std::this_thread::get_id();
  std::atomic<int> ran{0};
  std::atomic<bool> early{false};
  std::atomic<bool> wrong_thread{false};
  const auto added = Clock::now();
  for (const auto delay : {1ms, 5ms, 20ms}) {
    timer.add(make_task([&, delay] {
                if (Clock::now() - added < delay) early = true;
                if (std::this_thread::get_id() != io_thread) wrong_thread = true;
                ++ran;
              }),
              delay);
  }
  CHECK(ran_out_of_work(io, 30s));
  CHECK(ran == 3);
  CHECK_FALSE(early);
  CHECK_FALSE(wrong_thread);
  CHECK(timer.size() == 0);
}

TEST_CASE("AsioTimer: an idle timer keeps no work alive: io.run() returns at once") {
  boost::asio::io_context io;
  AsioTimer timer(io);
  Clock::duration took{};
  CHECK(ran_out_of_work(io, 30s, &took));
  CHECK(took < 10s);
}

TEST_CASE(
    "AsioTimer: a cancelled 30 s deadline leaves no wait armed: io.run() returns by itself long "
    "before it") {
  boost::asio::io_context io;
  AsioTimer timer(io);
  auto task = make_task([] {});
  timer.add(task, 30s);
  // The driver arms for 30 s on its strand; then the cancel empties the timer.
  boost::asio::steady_timer later(io, 10ms);
  later.async_wait([&](boost::system::error_code) { CHECK(task->cancel()); });
  Clock::duration took{};
  CHECK(ran_out_of_work(io, 60s, &took));
  CHECK(took < 20s);
  CHECK(timer.size() == 0);
}

TEST_CASE("AsioTimer: a cancel from another thread disarms it too") {
  boost::asio::io_context io;
  AsioTimer timer(io);
  auto task = make_task([] {});
  timer.add(task, 30s);
  std::atomic<bool> armed{false};
  // Something else keeps io running until the other thread has cancelled.
  auto guard = boost::asio::make_work_guard(io);
  std::thread canceller([&] {
    while (!armed.load())
      std::this_thread::yield();
    CHECK(task->cancel());
    guard.reset();
  });
  boost::asio::post(io, [&] { armed = true; });
  Clock::duration took{};
  CHECK(ran_out_of_work(io, 60s, &took));
  canceller.join();
  CHECK(took < 20s);
}

TEST_CASE("AsioTimer: async_wait() on it, and a task added from a task, run without threads") {
  boost::asio::io_context io;
  AsioTimer timer(io);
  int order = 0;
  int waited_at = 0;
  int chained_at = 0;
  purgatory::async_wait(timer, 5ms,
                        boost::asio::bind_executor(io, [&](boost::system::error_code ec) {
                          CHECK_FALSE(ec);
                          waited_at = ++order;
                          timer.add(make_task([&] { chained_at = ++order; }), 5ms);
                        }));
  CHECK(ran_out_of_work(io, 30s));
  CHECK(waited_at == 1);
  CHECK(chained_at == 2);
}

TEST_CASE("AsioTimer: two threads running the io_context: each of 2000 tasks runs exactly once") {
  boost::asio::io_context io;
  AsioTimer timer(io, purgatory::TimerOptions{.name = "two"});
  constexpr int kTasks = 2000;
  std::vector<std::atomic<int>> runs(kTasks);
  for (int i = 0; i < kTasks; ++i) {
    timer.add(make_task([&runs, i] { runs[static_cast<std::size_t>(i)].fetch_add(1); }),
              std::chrono::milliseconds(i % 20));
  }
  std::thread second([&] { io.run(); });
  CHECK(ran_out_of_work(io, 60s));
  second.join();
  int once = 0;
  for (const auto& r : runs)
    once += r.load() == 1 ? 1 : 0;
  CHECK(once == kTasks);
}

TEST_CASE("AsioTimer: on a strand, destroyed with tasks pending: none runs and io.run() returns") {
  boost::asio::io_context io;
  std::atomic<int> ran{0};
  {
    AsioTimer timer(boost::asio::make_strand(io));
    timer.add(make_task([&] { ++ran; }), 1h);
    timer.add(make_task([&] { ++ran; }), 1ms);
    const auto start = Clock::now();
    while (ran == 0 && Clock::now() - start < 30s)
      (void)io.run_one_for(1s);
    CHECK(ran == 1);  // the driver is armed for the hour now
  }
  CHECK(ran_out_of_work(io, 30s));
  CHECK(ran == 1);
}

TEST_CASE("AsioTimer: the executor and the clock are the io_context's: others are refused") {
  boost::asio::io_context io;
  purgatory::TimerOptions with_executor;
  with_executor.executor = std::make_shared<purgatory::InlineExecutor>();
  CHECK_THROWS_WITH_AS(AsioTimer(io, with_executor), doctest::Contains("executor"),
                       std::invalid_argument);
  const purgatory::ManualClock manual;
  CHECK_THROWS_WITH_AS(AsioTimer(io, purgatory::TimerOptions{.clock = &manual}),
                       doctest::Contains("SteadyClock"), std::invalid_argument);
}

TEST_CASE("AsioTimer: tasks at 20, 5, 10 ms run in deadline order on the io_context thread") {
  OnIo a;
  std::vector<int> order;
  std::vector<bool> on_time;
  const auto start = std::chrono::steady_clock::now();
  for (int ms : {20, 5, 10}) {
    a.timer.add(purgatory::make_task([&, ms] {
                  order.push_back(ms);
                  on_time.push_back(std::chrono::steady_clock::now() - start >=
                                    std::chrono::milliseconds(ms));
                }),
                std::chrono::milliseconds(ms));
  }
  auto cancelled = purgatory::make_task([&] { order.push_back(-1); });
  a.timer.add(cancelled, 7ms);
  CHECK(cancelled->cancel());
  // run() returns by itself once nothing is pending: an idle AsioTimer keeps no wait armed.
  a.io.run_for(30s);
  CHECK(order == std::vector<int>{5, 10, 20});
  CHECK(on_time == std::vector<bool>{true, true, true});
  CHECK(a.timer.size() == 0);
}

TEST_CASE("AsioTimer: an earlier task added while the driver waits re-arms its wait") {
  OnIo a;
  std::vector<int> order;
  a.timer.add(purgatory::make_task([&] { order.push_back(2000); }), 2s);
  std::thread adder([&] {
    std::this_thread::sleep_for(20ms);
    a.timer.add(purgatory::make_task([&] {
                  order.push_back(10);
                  a.io.stop();  // the 2 s task is still pending: stop here
                }),
                10ms);
  });
  const auto start = std::chrono::steady_clock::now();
  a.io.run_for(30s);
  adder.join();
  CHECK(order == std::vector<int>{10});
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK(a.timer.size() == 1);
}

TEST_CASE("AsioTimer: after close() io.run() returns at once, not at the next deadline") {
  OnIo a;
  a.timer.add(purgatory::make_task([] {}), 60s);
  std::thread closer([&] {
    std::this_thread::sleep_for(50ms);
    a.timer.close();
  });
  const auto start = std::chrono::steady_clock::now();
  a.io.run_for(30s);
  closer.join();
  CHECK(std::chrono::steady_clock::now() - start < 20s);
}

}  // namespace
