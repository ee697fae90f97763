#include "purgatory/timer/asio.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "purgatory/timer/async.hpp"

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

// An io_context and an AsioTimer on it.
struct OnIo {
  boost::asio::io_context io;
  purgatory::AsioTimer timer{io, purgatory::TimerOptions{.name = "asio"}};
};

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
