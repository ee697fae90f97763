// Contract tests for purgatory/timer/system_timer.hpp: add() and add_at(), their errors and
// max_pending.
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

namespace {

// A ManualClock that counts how often it is read.
class CountingClock final : public Clock {
 public:
  [[nodiscard]] Nanos now() const noexcept override {
    reads.fetch_add(1);
    return inner.now();
  }
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  Nanos deadline) const override {
    inner.wait_until(lock, cv, deadline);
  }
  void add_waiter(detail::ClockWaiter* w) const override { inner.add_waiter(w); }
  void remove_waiter(detail::ClockWaiter* w) const override { inner.remove_waiter(w); }

  ManualClock inner;
  mutable std::atomic<int> reads{0};
};

}  // namespace

TEST_CASE(
    "system_timer.hpp: add(), add_at(), reschedule() and cancel() of tasks in existing levels "
    "allocate nothing") {
  if (!CountAllocations::available()) {
    MESSAGE("allocations are not counted under ThreadSanitizer (release and ASan builds count)");
    return;
  }
  ManualTimer m;
  std::vector<TaskRef> tasks;
  for (int i = 0; i < 1000; ++i)
    tasks.push_back(purgatory::make_task<CountingTask>());
  for (auto& t : tasks)  // creates the levels a delay of up to 10 s needs
    m.timer.add(t, std::chrono::milliseconds(1 + (&t - tasks.data()) * 10));
  for (auto& t : tasks)
    t->cancel();
  const CountAllocations allocations;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const auto delay = std::chrono::milliseconds(1 + static_cast<long>(i) * 10);
    m.timer.add(tasks[i], delay);
    CHECK(m.timer.reschedule(*tasks[i], delay / 2 + 1ms));
    CHECK(tasks[i]->cancel());
    m.timer.add_at(tasks[i], m.clock.now() + delay);
  }
  for (auto& t : tasks)
    CHECK(t->cancel());
  CHECK(allocations.count() == 0);
}

TEST_CASE(
    "system_timer.hpp: kMaxDelay (about 100 years) is accepted by add() and add_at() in every "
    "tick and clock configuration, one nanosecond more is refused naming the value") {
  struct Config {
    Nanos tick;
    int wheel_size;
    Nanos start;
  };
  for (const Config c : {Config{1ns, 2, 0ns}, Config{1ns, 20, Nanos{1'000'000'000'000'000'000}},
                         Config{1ms, 20, 0ns}, Config{1ms, 4096, 5s},
                         Config{24h, 2, Nanos{1'000'000'000'000'000'000}}, Config{24h, 20, 0ns}}) {
    INFO("tick " << c.tick.count() << " ns, " << c.wheel_size << " slots, clock at "
                 << c.start.count());
    ManualClock clock(c.start);
    SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>(),
                                     {.tick = c.tick, .wheel_size = c.wheel_size}));
    ExternalDriver driver(timer);
    auto longest = purgatory::make_task<CountingTask>();
    CHECK_NOTHROW(timer.add(longest, SystemTimer::kMaxDelay));
    CHECK(longest->is_pending());
    auto longest_at = purgatory::make_task<CountingTask>();
    CHECK_NOTHROW(timer.add_at(longest_at, clock.now() + SystemTimer::kMaxDelay));
    CHECK(longest_at->is_pending());
    auto beyond = purgatory::make_task<CountingTask>();
    const std::string named = std::to_string((SystemTimer::kMaxDelay + 1ns).count());
    CHECK_THROWS_WITH_AS(timer.add(beyond, SystemTimer::kMaxDelay + 1ns),
                         doctest::Contains(named.c_str()), std::invalid_argument);
    CHECK_FALSE(beyond->is_pending());
    clock.advance(1h);
    driver.advance_clock();
    CHECK(longest->runs == 0);  // not early either
    timer.close();
  }
  CHECK(SystemTimer::kMaxDelay >= std::chrono::hours(24 * 365 * 100));
}

TEST_CASE(
    "system_timer.hpp: add() with a delay <= 0 hands nothing to the executor inside the call: "
    "the driver's next pass does, without the clock moving, and cancel() still withdraws it") {
  DrivenTimer<StashExecutor> m;
  auto zero = purgatory::make_task<CountingTask>();
  auto negative = purgatory::make_task<CountingTask>();
  auto withdrawn = purgatory::make_task<CountingTask>();
  m.timer.add(zero, 0ns);
  m.timer.add(negative, -5ms);
  m.timer.add(withdrawn, 0ns);
  CHECK(m.executor->held() == 0);
  CHECK(m.timer.size() == 3);  // pending until the pass
  REQUIRE(m.timer.next_expiration().has_value());
  CHECK(*m.timer.next_expiration() <= m.clock.now());  // due: the driver must not sleep
  CHECK(withdrawn->cancel());
  CHECK(m.driver.advance_clock(Nanos::zero()));
  // One batch: both, the cancelled one not.
  CHECK(m.executor->sizes() == std::vector<std::size_t>{2});
  CHECK(m.timer.size() == 0);
  m.executor->run_all();
  CHECK(zero->runs == 1);
  CHECK(negative->runs == 1);
  CHECK(withdrawn->runs == 0);
}

TEST_CASE(
    "system_timer.hpp: add() of a task already pending here moves it to the new deadline: it "
    "runs once, at the new deadline (README: 'adding again moves it')") {
  ManualTimer m;
  std::vector<Nanos> ran_at;
  auto task = purgatory::make_task([&] { ran_at.push_back(m.clock.now()); });
  m.timer.add(task, 50ms);
  m.timer.add(task, 5ms);  // earlier
  m.timer.add(task, 8ms);  // later again
  CHECK(m.timer.size() == 1);
  for (int i = 0; i < 60; ++i)
    m.advance(1ms);
  CHECK(ran_at == std::vector<Nanos>{8ms});
  // README: add 50 ms, add 500 ms, cancel(): true, and it never runs.
  int retry_runs = 0;
  auto retry = purgatory::make_task([&] { ++retry_runs; });
  m.timer.add(retry, 50ms);
  m.timer.add(retry, 500ms);
  CHECK(retry->cancel());
  for (int i = 0; i < 60; ++i)
    m.advance(10ms);
  CHECK(retry_runs == 0);
}

TEST_CASE(
    "system_timer.hpp: add() of a task expired but not yet started withdraws that run: it runs "
    "once, at the new deadline") {
  DrivenTimer<StashExecutor> m;
  std::vector<Nanos> ran_at;
  auto task = purgatory::make_task([&] { ran_at.push_back(m.clock.now()); });
  m.timer.add(task, 2ms);
  m.step(2ms);
  REQUIRE(m.executor->held() == 1);
  m.timer.add(task, 10ms);
  m.executor->run_all();  // the withdrawn run
  CHECK(ran_at.empty());
  m.step(10ms);
  m.executor->run_all();
  CHECK(ran_at == std::vector<Nanos>{12ms});
}

TEST_CASE(
    "system_timer.hpp: add() throws std::invalid_argument for a null task, a delay above "
    "kMaxDelay, a deadline overflowing the clock, or a task pending in another timer, and changes "
    "nothing") {
  ManualTimer m;
  auto task = purgatory::make_task<CountingTask>();
  CHECK_THROWS_WITH_AS(m.timer.add(TaskRef(), 1ms), doctest::Contains("null"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(m.timer.add_at(TaskRef(), 1ms), doctest::Contains("null"),
                       std::invalid_argument);
  CHECK_THROWS_AS(m.timer.add(task, Nanos::max()), std::invalid_argument);
  CHECK_FALSE(task->is_pending());
  m.timer.add(task, 3ms);
  CHECK_THROWS_AS(m.timer.add(task, SystemTimer::kMaxDelay + 1ms), std::invalid_argument);
  CHECK(task->is_pending());  // still at its old deadline
  CHECK(m.timer.size() == 1);

  ManualClock late(Nanos{std::numeric_limits<Nanos::rep>::max() - Nanos(1h).count()});
  SystemTimer at_the_end(TimerOptions{.clock = &late, .driver = TimerOptions::Driver::external});
  auto overflow = purgatory::make_task<CountingTask>();
  CHECK_THROWS_WITH_AS(at_the_end.add(overflow, 2h), doctest::Contains("overflows"),
                       std::invalid_argument);
  CHECK_FALSE(overflow->is_pending());
  CHECK_THROWS_WITH_AS(at_the_end.add(task, 1ms), doctest::Contains("another timer"),
                       std::invalid_argument);
  CHECK(at_the_end.size() == 0);
  m.advance(3ms);
  CHECK(task->runs == 1);
}

TEST_CASE(
    "system_timer.hpp: max_pending bounds the tasks in the wheel: the add past it throws "
    "TimerRejected (pending_limit) naming the limit, moving a pending task is accepted") {
  ManualTimer m(1ms, 20, /*max_pending=*/3);
  std::vector<TaskRef> tasks;
  for (int i = 0; i < 4; ++i)
    tasks.push_back(purgatory::make_task<CountingTask>());
  for (int i = 0; i < 3; ++i)
    m.timer.add(tasks[i], 5ms);
  try {
    m.timer.add(tasks[3], 5ms);
    FAIL("the 4th add must be refused");
  } catch (const TimerRejected& e) {
    CHECK(e.reason() == TimerRejected::Reason::pending_limit);
    CHECK(std::string(e.what()).find('3') != std::string::npos);
  }
  CHECK_FALSE(tasks[3]->is_pending());
  CHECK_NOTHROW(m.timer.add(tasks[0], 9ms));  // a move, not a new task
  CHECK(tasks[1]->cancel());
  CHECK_NOTHROW(m.timer.add(tasks[3], 5ms));  // room again
  CHECK(m.timer.size() == 3);
}

TEST_CASE(
    "system_timer.hpp: add_at() reads the clock only when the wheel is empty or the deadline "
    "looks more than kMaxDelay away") {
  CountingClock clock;
  SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>()));
  auto first = purgatory::make_task<CountingTask>();
  auto second = purgatory::make_task<CountingTask>();
  clock.reads = 0;
  timer.add_at(first, 1h);  // empty wheel: catches up with the clock
  CHECK(clock.reads.load() >= 1);
  clock.reads = 0;
  for (int i = 0; i < 100; ++i)
    timer.add_at(second, Nanos{5'000'000 + i});  // a server that knows the time
  CHECK(clock.reads.load() == 0);
  timer.close();
}

TEST_CASE(
    "system_timer.hpp: add_at() with a deadline already passed runs at the next expiry pass, and "
    "at once when a driver is waiting") {
  SUBCASE("external driver: the next advance_clock()") {
    ManualTimer m;
    auto distant = purgatory::make_task<CountingTask>();
    m.timer.add(distant, 1h);  // the wheel is not empty: it does not catch up on add
    m.clock.advance(100ms);
    auto past = purgatory::make_task<CountingTask>();
    m.timer.add_at(past, 50ms);
    m.driver.advance_clock(Nanos::zero());
    CHECK(past->runs == 1);
    auto negative = purgatory::make_task<CountingTask>();
    m.timer.add_at(negative, -1ms);
    m.driver.advance_clock(Nanos::zero());
    CHECK(negative->runs == 1);
  }
  SUBCASE("a reaper waiting: at once, with no clock movement") {
    ManualClock clock(100ms);
    SystemTimer timer(TimerOptions{.name = "past", .clock = &clock});
    timer.add(purgatory::make_task<CountingTask>(), 1h);
    Signal ran;
    timer.add_at(purgatory::make_task([&] { ran.set(); }), 50ms);
    CHECK(ran.wait());
    CHECK(clock.now() == 100ms);
    timer.close();
  }
}
