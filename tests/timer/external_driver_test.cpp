// external_driver.hpp: every promise of ExternalDriver, the one public way to drive a timer from a
// loop of your own.
#include "purgatory/timer/external_driver.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include <doctest/doctest.h>
#include <boost/asio/io_context.hpp>

#include "manual_timer.hpp"
#include "purgatory/timer/asio.hpp"
#include "timer_test_support.hpp"

namespace purgatory::test {
namespace {

using namespace std::chrono_literals;

// The external driver's calls are the driver's, not the timer's: an AsioTimer (which drives
// itself) shows none of them and takes no ExternalDriver.
template <class T>
concept ShowsDriverCalls = requires(T& t) {
  t.arm();
}
|| requires(T& t) {
  t.advance_clock(Nanos::zero());
}
|| requires(T& t) {
  t.set_wakeup_hook([] {});
};
static_assert(!ShowsDriverCalls<SystemTimer>);
static_assert(!ShowsDriverCalls<AsioTimer>);
static_assert(!std::is_constructible_v<ExternalDriver, AsioTimer&>);
static_assert(std::is_constructible_v<ExternalDriver, SystemTimer&>);

TEST_CASE(
    "external_driver.hpp: an AsioTimer drives itself: seen as a SystemTimer, the constructor "
    "throws std::invalid_argument saying it already has a driver, and the timer keeps working") {
  boost::asio::io_context io;
  AsioTimer timer(io);
  SystemTimer& plain = timer;
  CHECK_THROWS_WITH_AS(ExternalDriver{plain}, doctest::Contains("already has a driver"),
                       std::invalid_argument);
  bool ran = false;
  timer.add(make_task([&] { ran = true; }), 1ms);
  io.run();  // the io_context's wait, not a replaced hook, expires it
  CHECK(ran);
}

TEST_CASE(
    "external_driver.hpp: a timer not made with Driver::external is refused with "
    "std::invalid_argument naming Driver::external") {
  SystemTimer reaped(TimerOptions{.name = "reaped"});
  CHECK_THROWS_WITH_AS(ExternalDriver{reaped}, doctest::Contains("Driver::external"),
                       std::invalid_argument);
}

TEST_CASE(
    "external_driver.hpp: one driver per timer: a second is refused while the first lives, and "
    "once it is destroyed the timer keeps its tasks and takes another") {
  ManualClock clock;
  SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>()));
  auto task = make_task<CountingTask>();
  auto first = std::make_unique<ExternalDriver>(timer);
  CHECK_THROWS_AS(ExternalDriver{timer}, std::invalid_argument);
  timer.add(task, 5ms);
  first.reset();
  ExternalDriver second(timer);
  CHECK(&second.timer() == &timer);
  CHECK(second.arm() == std::optional<Nanos>(5ms));
  clock.advance(5ms);
  CHECK(second.advance_clock());
  CHECK(task->runs == 1);
}

TEST_CASE(
    "external_driver.hpp: timeout_ms() is -1 with nothing pending, 0 when a task is due now, and "
    "the milliseconds to the armed instant rounded up, so that a wait never ends before it") {
  ManualClock clock;
  SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>(), {.tick = 100us}));
  ExternalDriver driver(timer);
  CHECK(driver.timeout_ms() == -1);
  auto task = make_task<CountingTask>();
  timer.add(task, 1500us);
  CHECK(driver.timeout_ms() == 2);  // 1.5 ms, rounded up
  clock.advance(1ms);
  CHECK(driver.timeout_ms() == 1);  // 0.5 ms left
  CHECK_FALSE(driver.advance_clock());
  clock.advance(500us);
  CHECK(driver.timeout_ms() == 0);
  CHECK(driver.advance_clock());
  CHECK(task->runs == 1);
  CHECK(driver.timeout_ms() == -1);
  timer.add(task, 0ms);  // due at once: the next pass, not this call
  CHECK(driver.timeout_ms() == 0);
  CHECK(task->runs == 1);
}

TEST_CASE(
    "external_driver.hpp: once the destructor returns, the wakeup is not running and is never "
    "called again, while another thread keeps adding tasks that would call it") {
  for (int round = 0; round < 50; ++round) {
    ManualClock clock;
    SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>(), {.bases = 1}));
    std::atomic<int> calls{0};
    std::atomic<bool> inside{false};
    std::atomic<bool> stop{false};
    auto driver = std::make_unique<ExternalDriver>(timer, [&] {
      inside = true;
      calls.fetch_add(1);
      std::this_thread::yield();
      inside = false;
    });
    (void)driver->arm();  // nothing pending: the first add wakes the loop
    std::thread adder([&] {
      auto task = make_task<CountingTask>();
      while (!stop.load()) {
        timer.add(task, 0ms);  // due at once, into an empty due list: a wakeup each time
        (void)task->cancel();  // empties the timer: a wakeup too
      }
    });
    while (calls.load() < 10)
      std::this_thread::yield();
    driver.reset();
    CHECK_FALSE(inside.load());
    const int after = calls.load();
    std::this_thread::sleep_for(1ms);
    stop = true;
    adder.join();
    CHECK(calls.load() == after);
  }
}

}  // namespace
}  // namespace purgatory::test
