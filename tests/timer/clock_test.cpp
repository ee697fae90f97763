// Contract tests for purgatory/timer/clock.hpp: one test per promise (docs/contracts.md).
#include "purgatory/timer/clock.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;

namespace {

// Records the clock's time each time it is told the clock moved.
class RecordingWaiter final : public purgatory::detail::ClockWaiter {
 public:
  explicit RecordingWaiter(const ManualClock& clock) : clock_(clock) {}
  void on_clock_advanced() noexcept override { seen.push_back(clock_.now()); }
  std::vector<Nanos> seen;

 private:
  const ManualClock& clock_;
};

}  // namespace

TEST_CASE(
    "clock.hpp: SteadyClock::now() never decreases, is never negative, and is steady_clock's "
    "time_since_epoch()") {
  const SteadyClock& clock = SteadyClock::instance();
  Nanos last = clock.now();
  CHECK(last >= Nanos::zero());
  for (int i = 0; i < 10'000; ++i) {
    const auto before = std::chrono::steady_clock::now().time_since_epoch();
    const Nanos now = clock.now();
    const auto after = std::chrono::steady_clock::now().time_since_epoch();
    REQUIRE(now >= last);
    // Converts exactly to a steady_clock::time_point: it lies between two steady_clock reads.
    REQUIRE(std::chrono::duration_cast<Nanos>(before) <= now);
    REQUIRE(now <= std::chrono::duration_cast<Nanos>(after));
    last = now;
  }
}

TEST_CASE(
    "clock.hpp: SteadyClock::instance() is one process-wide instance, the default clock of "
    "every SystemTimer") {
  CHECK(&SteadyClock::instance() == &SteadyClock::instance());
  SystemTimer timer(TimerOptions{.driver = TimerOptions::Driver::external});
  CHECK(&timer.clock() == &SteadyClock::instance());
}

TEST_CASE(
    "clock.hpp: ManualClock starts at the instant given and moves only when advance() is called, "
    "by exactly the step") {
  ManualClock clock(7s);
  CHECK(clock.now() == 7s);
  std::this_thread::sleep_for(2ms);  // real time passes; manual time does not
  CHECK(clock.now() == 7s);
  clock.advance(5ms);
  CHECK(clock.now() == 7s + 5ms);
  clock.advance(0ns);
  CHECK(clock.now() == 7s + 5ms);
  CHECK(ManualClock().now() == 0ns);
}

TEST_CASE(
    "clock.hpp: ManualClock::advance() throws std::invalid_argument naming a negative step, and "
    "the clock does not move") {
  ManualClock clock(1s);
  CHECK_THROWS_WITH_AS(clock.advance(-3ns), doctest::Contains("-3"), std::invalid_argument);
  CHECK(clock.now() == 1s);
}

TEST_CASE(
    "clock.hpp: ManualClock is thread-safe: 4 threads advance while 2 read, every step counts "
    "and no reader sees now() decrease") {
  ManualClock clock;
  std::atomic<bool> stop{false};
  std::atomic<int> decreases{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      Nanos last = clock.now();
      while (!stop.load()) {
        const Nanos now = clock.now();
        if (now < last) decreases.fetch_add(1);
        last = now;
      }
    });
  }
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 2000; ++i)
        clock.advance(Nanos{w + 1});
    });
  }
  for (std::thread& t : writers)
    t.join();
  stop = true;
  for (std::thread& t : readers)
    t.join();
  CHECK(clock.now() == Nanos{2000 * (1 + 2 + 3 + 4)});
  CHECK(decreases.load() == 0);
}

TEST_CASE(
    "clock.hpp: ManualClock::advance() wakes every registered waiter after the time moved, and "
    "no waiter once removed") {
  ManualClock clock;
  RecordingWaiter a(clock);
  RecordingWaiter b(clock);
  clock.add_waiter(&a);
  clock.add_waiter(&b);
  clock.advance(3ms);
  clock.advance(0ms);  // a step of zero still wakes them
  clock.remove_waiter(&b);
  clock.advance(2ms);
  clock.remove_waiter(&a);
  clock.advance(1ms);
  CHECK(a.seen == std::vector<Nanos>{3ms, 3ms, 5ms});  // the new time, already visible
  CHECK(b.seen == std::vector<Nanos>{3ms, 3ms});
}

TEST_CASE(
    "clock.hpp: Clock::wait_until() on SteadyClock returns by the deadline, and with Nanos::max() "
    "returns on a notification") {
  const SteadyClock& clock = SteadyClock::instance();
  std::mutex mu;
  std::condition_variable cv;
  {
    // The caller re-checks its condition: the loop ends once now() >= deadline.
    std::unique_lock<std::mutex> lock(mu);
    const Nanos deadline = clock.now() + 5ms;
    int waits = 0;
    while (clock.now() < deadline) {
      clock.wait_until(lock, cv, deadline);
      ++waits;
    }
    CHECK(waits >= 1);
    CHECK(clock.now() >= deadline);
  }
  {
    bool notified = false;
    Signal waiting;
    std::thread waiter([&] {
      std::unique_lock<std::mutex> lock(mu);
      waiting.set();
      while (!notified)
        clock.wait_until(lock, cv, Nanos::max());
    });
    REQUIRE(waiting.wait());
    {
      const std::lock_guard<std::mutex> lock(mu);
      notified = true;
    }
    cv.notify_all();
    waiter.join();  // returns: the notification woke it
    CHECK(notified);
  }
}

TEST_CASE(
    "clock.hpp: a timer on a ManualClock never runs a task on real time: its reaper sleeps until "
    "the test advances the clock far enough") {
  ManualClock clock;
  SystemTimer timer(TimerOptions{.name = "manual-reaper", .clock = &clock});  // reaper thread
  Signal ran;
  timer.add(purgatory::make_task([&] { ran.set(); }), 5ms);
  std::this_thread::sleep_for(30ms);  // far more than 5 ms of real time
  CHECK_FALSE(ran.is_set());
  clock.advance(4ms);
  std::this_thread::sleep_for(10ms);
  CHECK_FALSE(ran.is_set());
  clock.advance(1ms);  // now due: the reaper, woken by the clock, expires it
  CHECK(ran.wait());
  timer.close();
}
