// Contract tests for purgatory/timer/system_timer.hpp: what drivers see: advance_clock(), arm()
// and the wakeup hook, batches, and the queries (size(), next_expiration(), memory).
#include "purgatory/timer/system_timer.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/external_driver.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

namespace {

// Calls `timer`'s members from wherever it is run (a task, an executor): with a timer lock held
// by the caller, the first of them would deadlock.
void call_every_member(SystemTimer& timer, const TaskRef& other) {
  (void)timer.size();
  (void)timer.size_per_level();
  (void)timer.wheel_memory_bytes();
  (void)timer.next_expiration();
  (void)timer.is_closed();
  (void)timer.wakeups();
  timer.add(other, 1h);
  (void)timer.reschedule(*other, 2h);
  (void)other->cancel();
  timer.add_at(other, timer.clock().now() + 1h);
  (void)other->cancel();
}

// Calls every member of `timer` before running each batch it is given (a timer lock held by its
// caller would deadlock it), and records the batches' sizes.
struct CallingExecutor final : purgatory::Executor {
  SystemTimer* timer = nullptr;
  TaskRef other = purgatory::make_task<CountingTask>();
  std::vector<std::size_t> sizes;
  void execute(ExpiredBatch& batch) override {
    sizes.push_back(batch.size());
    call_every_member(*timer, other);  // no timer lock held
    batch.run_all();
  }
};

}  // namespace

TEST_CASE(
    "system_timer.hpp: with Driver::external nothing expires until advance_clock() is called") {
  ManualTimer m;
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 1ms);
  m.clock.advance(5ms);
  CHECK(task->runs == 0);
  CHECK(m.driver.advance_clock(Nanos::zero()));
  CHECK(task->runs == 1);
}

TEST_CASE(
    "system_timer.hpp: advance_clock() hands the executor batches of at most kMaxBatch tasks and "
    "releases its lock between them: the executor may call the timer") {
  DrivenTimer<CallingExecutor> m;
  m.executor->timer = &m.timer;
  std::atomic<int> runs{0};
  for (int i = 0; i < 1000; ++i)
    m.timer.add(purgatory::make_task([&] { runs.fetch_add(1); }), 5ms);
  m.clock.advance(5ms);
  const Watchdog watchdog("advance_clock with an executor calling the timer");
  CHECK(m.driver.advance_clock(Nanos::zero()));
  CHECK(runs.load() == 1000);
  std::size_t total = 0;
  for (const std::size_t s : m.executor->sizes) {
    CHECK(s <= SystemTimer::kMaxBatch);
    total += s;
  }
  CHECK(total == 1000);
  CHECK(m.executor->sizes.size() >= 4);
  m.timer.close();
}

TEST_CASE(
    "system_timer.hpp: advance_clock(): max_wait <= 0 never blocks, it returns whether any "
    "bucket was due") {
  ManualTimer m;
  CHECK_FALSE(m.driver.advance_clock(Nanos::zero()));
  CHECK_FALSE(m.driver.advance_clock(-1s));
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 2ms);
  m.clock.advance(1ms);
  CHECK_FALSE(m.driver.advance_clock(Nanos::zero()));
  m.clock.advance(1ms);
  CHECK(m.driver.advance_clock(Nanos::zero()));
  CHECK(task->runs == 1);
}

TEST_CASE(
    "system_timer.hpp: advance_clock(Nanos::max()) waits until something is due, or until "
    "close()") {
  {
    ManualTimer m(TimerOptions::Concurrency::thread_safe);  // driven on another thread
    auto task = purgatory::make_task<CountingTask>();
    m.timer.add(task, 5ms);
    std::atomic<bool> returned{false};
    Nanos returned_at{-1};
    std::thread waiter([&] {
      CHECK(m.driver.advance_clock(Nanos::max()));
      returned_at = m.clock.now();
      returned = true;
    });
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(2ms);
      CHECK_FALSE(returned.load());
      m.clock.advance(1ms);
    }
    waiter.join();
    CHECK(returned_at >= 5ms);
    CHECK(task->runs == 1);
  }
  {
    ManualTimer m;
    std::atomic<bool> result{true};
    Signal started;
    std::thread waiter([&] {
      started.set();
      result = m.driver.advance_clock(Nanos::max());
    });
    REQUIRE(started.wait());
    std::this_thread::sleep_for(5ms);
    m.timer.close();
    waiter.join();  // close() woke it
    CHECK_FALSE(result.load());
  }
}

TEST_CASE(
    "system_timer.hpp: advance_clock(max_wait) on a ManualClock waits until the clock moved "
    "max_wait, then returns false when nothing is due") {
  ManualTimer m(TimerOptions::Concurrency::thread_safe);  // driven on another thread
  m.timer.add(purgatory::make_task<CountingTask>(), 1h);
  std::atomic<bool> done{false};
  Nanos returned_at{-1};
  bool result = true;
  std::thread waiter([&] {
    result = m.driver.advance_clock(5ms);
    returned_at = m.clock.now();
    done = true;
  });
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (!done.load() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
    m.clock.advance(1ms);
  }
  waiter.join();
  CHECK_FALSE(result);
  CHECK(returned_at >= 5ms);
}

TEST_CASE(
    "system_timer.hpp: size() counts the tasks in the wheel, not those expired and waiting for "
    "the executor, size_per_level() lists them finest level first") {
  DrivenTimer<StashExecutor> m;
  for (const auto d : {1ms, 5ms, 25ms, 30ms, 500ms})
    m.timer.add(purgatory::make_task<CountingTask>(), d);
  CHECK(m.timer.size() == 5);
  CHECK(m.timer.size_per_level() == std::vector<std::size_t>{2, 2, 1});
  m.step(1ms);
  CHECK(m.executor->held() == 1);
  CHECK(m.timer.size() == 4);
  m.executor->run_all();
  m.timer.close();
}

TEST_CASE(
    "system_timer.hpp: wheel_memory_bytes() does not grow with the tasks, only with the levels") {
  ManualTimer m;
  const std::size_t empty = m.timer.wheel_memory_bytes();
  std::vector<TaskRef> tasks;
  for (int i = 0; i < 5000; ++i) {
    tasks.push_back(purgatory::make_task<CountingTask>());
    m.timer.add(tasks.back(), std::chrono::milliseconds(1 + i % 19));
  }
  CHECK(m.timer.wheel_memory_bytes() == empty);
  m.timer.add(purgatory::make_task<CountingTask>(), 10s);
  CHECK(m.timer.wheel_memory_bytes() > empty);
}

TEST_CASE(
    "system_timer.hpp: next_expiration() is the clock time of the earliest bucket, none when "
    "nothing is scheduled") {
  ManualTimer m(10ms, 20);
  CHECK_FALSE(m.timer.next_expiration().has_value());
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 25ms);
  CHECK(m.timer.next_expiration() == std::optional<Nanos>(30ms));  // rounded up to the tick
  m.timer.add(purgatory::make_task<CountingTask>(), 90ms);
  CHECK(m.timer.next_expiration() == std::optional<Nanos>(30ms));
  task->cancel();
  CHECK(m.timer.next_expiration() == std::optional<Nanos>(90ms));
  m.advance(90ms);
  CHECK_FALSE(m.timer.next_expiration().has_value());
}

TEST_CASE(
    "system_timer.hpp: clock(), tick() and name() are the options given, by default SteadyClock, "
    "1 ms ticks and 20 slots per level") {
  SystemTimer defaults(TimerOptions{.driver = TimerOptions::Driver::external});
  CHECK(defaults.tick() == 1ms);
  CHECK(defaults.name() == "timer");
  CHECK(&defaults.clock() == &purgatory::SteadyClock::instance());
  defaults.add(purgatory::make_task<CountingTask>(), 18ms);
  CHECK(defaults.size_per_level().size() == 1);
  defaults.add(purgatory::make_task<CountingTask>(), 25ms);  // past 20 x 1 ms
  CHECK(defaults.size_per_level().size() == 2);
  defaults.close();
  ManualClock clock;
  SystemTimer given(TimerOptions{
      .name = "given", .tick = 3ms, .clock = &clock, .driver = TimerOptions::Driver::external});
  CHECK(given.tick() == 3ms);
  CHECK(given.name() == "given");
  CHECK(&given.clock() == &clock);
}

TEST_CASE(
    "system_timer.hpp: the wakeup hook is called, with no lock held, when an add() is due before "
    "the instant arm() last returned, and arm() returns next_expiration(), or the step of an "
    "ahead-of-time cascade when one is due first") {
  ManualClock clock;
  SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>()));
  int calls = 0;
  const Watchdog watchdog("wakeup hook calling the timer");
  ExternalDriver driver(timer, [&] {
    ++calls;
    (void)timer.size();  // no lock held
  });
  CHECK_FALSE(driver.arm().has_value());
  timer.add(purgatory::make_task<CountingTask>(), 10ms);
  CHECK(calls == 1);  // earlier than "nothing"
  CHECK(driver.arm() == std::optional<Nanos>(10ms));
  timer.add(purgatory::make_task<CountingTask>(), 15ms);
  CHECK(calls == 1);  // not earlier
  timer.add(purgatory::make_task<CountingTask>(), 5ms);
  CHECK(calls == 2);
  // All in the finest level (1 ms x 20): nothing to cascade, arm() is the earliest bucket.
  CHECK(driver.arm() == std::optional<Nanos>(5ms));
  CHECK(driver.arm() == timer.next_expiration());
  // A task in a coarse bucket (20 ms and up) is cascaded ahead of time: arm() may ask for that
  // step before the earliest bucket, never later, and once the driver made its passes it is the
  // earliest bucket again.
  timer.add(purgatory::make_task<CountingTask>(), 30ms);
  std::optional<Nanos> armed = driver.arm();
  REQUIRE(armed.has_value());
  CHECK(*armed <= 5ms);
  for (int pass = 0; pass < 20 && armed != timer.next_expiration(); ++pass) {
    if (*armed > clock.now()) clock.advance(*armed - clock.now());
    CHECK_FALSE(driver.advance_clock());  // a cascade step: nothing was due yet
    armed = driver.arm();
    REQUIRE(armed.has_value());
  }
  CHECK(armed == std::optional<Nanos>(5ms));
  CHECK(calls == 2);
}

TEST_CASE(
    "system_timer.hpp: the wakeup hook is called when a cancel() leaves the timer empty (so that "
    "a driver stops waiting), not for one that leaves a task pending, and by close(): what it "
    "throws goes to stderr naming the timer, and the cancel happened all the same") {
  ManualClock clock;
  SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>(), {.name = "hooked"}));
  int calls = 0;
  bool fail = false;
  ExternalDriver driver(timer, [&] {
    ++calls;
    if (fail) throw std::runtime_error("driver gone");
  });
  auto first = purgatory::make_task<CountingTask>();
  auto second = purgatory::make_task<CountingTask>();
  timer.add(first, 10ms);
  timer.add(second, 20ms);
  CHECK(driver.arm().has_value());  // the driver waits for something
  calls = 0;
  CHECK(first->cancel());
  CHECK(calls == 0);  // `second` is still pending: nothing for the driver to change
  fail = true;
  StderrCapture err;
  CHECK(second->cancel());
  const std::string printed = err.text();
  CHECK(calls == 1);
  CHECK(printed.find("timer 'hooked'") != std::string::npos);
  CHECK(printed.find("the driver's wakeup threw: driver gone") != std::string::npos);
  CHECK_FALSE(second->is_pending());
  CHECK(timer.size() == 0);
  CHECK_FALSE(driver.arm().has_value());
  fail = false;
  timer.close();
  CHECK(calls == 2);
  clock.advance(1s);
  CHECK(first->runs == 0);
  CHECK(second->runs == 0);
}

TEST_CASE(
    "system_timer.hpp: no lock is held while a task runs or the executor is called: both may call "
    "every member, and advance_clock() from an inline task does not deadlock") {
  DrivenTimer<CallingExecutor> m;
  m.executor->timer = &m.timer;
  const Watchdog watchdog("a task and an executor calling the timer");
  auto other = purgatory::make_task<CountingTask>();
  bool ran = false;
  m.timer.add(purgatory::make_task([&] {
                call_every_member(m.timer, other);
                (void)m.driver.advance_clock(Nanos::zero());
                ran = true;
              }),
              1ms);
  m.clock.advance(1ms);
  CHECK(m.driver.advance_clock(Nanos::zero()));
  CHECK(ran);
  m.timer.close();
}
