#include "purgatory/timer/asio.hpp"

#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <boost/asio/io_context.hpp>

using namespace std::chrono_literals;

namespace {

struct AsioTimer {
  boost::asio::io_context io;
  purgatory::SystemTimer timer{purgatory::TimerOptions{
      .name = "asio",
      .executor = std::make_shared<purgatory::AsioExecutor>(io.get_executor()),
      .driver = purgatory::TimerOptions::Driver::external}};
  purgatory::AsioDriver driver{io.get_executor(), timer};
};

}  // namespace

TEST_CASE("AsioDriver: tasks at 20, 5, 10 ms run in deadline order on the io_context thread") {
  AsioTimer a;
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
  // run() returns by itself once nothing is pending: the idle driver keeps no wait armed.
  a.io.run_for(30s);
  CHECK(order == std::vector<int>{5, 10, 20});
  CHECK(on_time == std::vector<bool>{true, true, true});
  CHECK(a.timer.size() == 0);
}

TEST_CASE("AsioDriver: an earlier task added while the driver waits re-arms the wait") {
  AsioTimer a;
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

TEST_CASE("AsioDriver: a task added from inside a task runs too") {
  AsioTimer a;
  int runs = 0;
  a.timer.add(purgatory::make_task([&] {
                ++runs;
                a.timer.add(purgatory::make_task([&] { ++runs; }), 5ms);
              }),
              5ms);
  a.io.run_for(30s);
  CHECK(runs == 2);
}

TEST_CASE("AsioDriver: refuses a timer on a manual clock") {
  boost::asio::io_context io;
  purgatory::ManualClock clock;
  purgatory::SystemTimer timer(purgatory::TimerOptions{
      .clock = &clock, .driver = purgatory::TimerOptions::Driver::external});
  CHECK_THROWS_AS(purgatory::AsioDriver(io.get_executor(), timer), std::invalid_argument);
}

TEST_CASE("AsioDriver: after close() io.run() returns at once, not at the next deadline") {
  AsioTimer a;
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
