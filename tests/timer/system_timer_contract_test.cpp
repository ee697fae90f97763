// Contract tests for purgatory/timer/system_timer.hpp, first part: scheduling, errors, queries,
// threads (close() and drain() are in system_timer_shutdown_contract_test.cpp).
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

#include "race_schedule.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using purgatory::detail::ClockWaiter;
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
  void add_waiter(ClockWaiter* w) const override { inner.add_waiter(w); }
  void remove_waiter(ClockWaiter* w) const override { inner.remove_waiter(w); }

  ManualClock inner;
  mutable std::atomic<int> reads{0};
};

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

std::string capture_stderr(const std::function<void()>& fn) {
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  FILE* tmp = std::tmpfile();
  dup2(fileno(tmp), STDERR_FILENO);
  fn();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::rewind(tmp);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), tmp) != nullptr)
    out += buf;
  std::fclose(tmp);
  return out;
}

}  // namespace

TEST_CASE(
    "system_timer.hpp: a task never runs before its deadline, and at most one tick after it "
    "(tick 10 ms, 300 deadlines at nanosecond resolution over 3 levels)") {
  ManualTimer m(10ms, 20);
  std::mt19937_64 rng(5);
  struct Due {
    Nanos deadline;
    Nanos ran{-1};
  };
  std::vector<Due> due(300);
  std::vector<TaskRef> tasks;
  for (std::size_t i = 0; i < due.size(); ++i) {
    tasks.push_back(purgatory::make_task([&, i] { due[i].ran = m.clock.now(); }));
  }
  std::size_t next = 0;
  for (int step = 0; step < 8000; ++step) {
    if (step < 2000 && step % 6 == 0 && next < due.size()) {
      const Nanos delay{static_cast<Nanos::rep>(rng() % 5'000'000'000ULL)};  // up to 5 s
      due[next].deadline = m.clock.now() + delay;
      m.timer.add(tasks[next], delay);
      ++next;
    }
    m.advance(1ms);
  }
  REQUIRE(next == due.size());
  for (const Due& d : due) {
    REQUIRE(d.ran >= Nanos::zero());
    CHECK(d.ran >= d.deadline);
    CHECK(d.ran < d.deadline + 10ms + 1ms);  // one tick, plus the test's 1 ms step
  }
  CHECK(m.timer.size_per_level().size() >= 3);
}

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
    "system_timer.hpp: with nothing pending the reaper sleeps without any wake-up, an add() wakes "
    "it, and the clock jumps to the next bucket instead of ticking") {
  SystemTimer timer(TimerOptions{.name = "idle"});  // real clock, reaper thread, 1 ms tick
  std::this_thread::sleep_for(100ms);
  CHECK(timer.wakeups() == 0);  // idle: no wake-up at all
  Signal ran;
  const auto added = std::chrono::steady_clock::now();
  timer.add(purgatory::make_task([&] { ran.set(); }), 150ms);
  REQUIRE(ran.wait());
  CHECK(std::chrono::steady_clock::now() - added >= 150ms);
  // 150 ticks went by; the reaper woke for the add, for the (cascaded) buckets and maybe a
  // spurious wake-up, not once per tick.
  CHECK(timer.wakeups() <= 10);
  const std::uint64_t after = timer.wakeups();
  std::this_thread::sleep_for(50ms);
  CHECK(timer.wakeups() == after);  // idle again
  timer.close();
}

TEST_CASE(
    "system_timer.hpp: by default expired tasks run on a thread the timer owns, not the caller's, "
    "TimerOptions::name names the reaper and executor threads") {
  SystemTimer timer(TimerOptions{.name = "named"});
  std::string ran_on;
  Signal ran;
  timer.add(purgatory::make_task([&] {
              ran_on = purgatory::contract::thread_name();
              ran.set();
            }),
            1ms);
  REQUIRE(ran.wait());
  CHECK(ran_on.find("named") != std::string::npos);
  CHECK(ran_on != "reaper-named");
  CHECK(purgatory::contract::thread_name().find("named") == std::string::npos);
  timer.close();
}

TEST_CASE(
    "system_timer.hpp: with Driver::external nothing expires until advance_clock() is called") {
  ManualTimer m;
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 1ms);
  m.clock.advance(5ms);
  CHECK(task->runs == 0);
  CHECK(m.timer.advance_clock(Nanos::zero()));
  CHECK(task->runs == 1);
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
    SystemTimer timer(TimerOptions{.tick = c.tick,
                                   .wheel_size = c.wheel_size,
                                   .clock = &clock,
                                   .executor = std::make_shared<purgatory::InlineExecutor>(),
                                   .driver = TimerOptions::Driver::external});
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
    timer.advance_clock(Nanos::zero());
    CHECK(longest->runs == 0);  // not early either
    timer.close();
  }
  CHECK(SystemTimer::kMaxDelay >= std::chrono::hours(24 * 365 * 100));
}

TEST_CASE(
    "system_timer.hpp: advance_clock() hands the executor batches of at most kMaxBatch tasks and "
    "releases its lock between them: the executor may call the timer") {
  struct Recording final : purgatory::Executor {
    SystemTimer* timer = nullptr;
    TaskRef other = purgatory::make_task<CountingTask>();
    std::vector<std::size_t> sizes;
    void execute(ExpiredBatch& batch) override {
      sizes.push_back(batch.size());
      call_every_member(*timer, other);  // no timer lock held
      batch.run_all();
    }
  };
  auto recording = std::make_shared<Recording>();
  ManualClock clock;
  SystemTimer timer(TimerOptions{
      .clock = &clock, .executor = recording, .driver = TimerOptions::Driver::external});
  recording->timer = &timer;
  std::atomic<int> runs{0};
  for (int i = 0; i < 1000; ++i)
    timer.add(purgatory::make_task([&] { runs.fetch_add(1); }), 5ms);
  clock.advance(5ms);
  const Watchdog watchdog("advance_clock with an executor calling the timer");
  CHECK(timer.advance_clock(Nanos::zero()));
  CHECK(runs.load() == 1000);
  std::size_t total = 0;
  for (const std::size_t s : recording->sizes) {
    CHECK(s <= SystemTimer::kMaxBatch);
    total += s;
  }
  CHECK(total == 1000);
  CHECK(recording->sizes.size() >= 4);
  timer.close();
}

TEST_CASE(
    "system_timer.hpp: the constructor throws std::invalid_argument naming a tick <= 0 or above "
    "one day, or a wheel_size outside [2, 65536]") {
  auto make = [](Nanos tick, int wheel_size) {
    SystemTimer t(TimerOptions{
        .tick = tick, .wheel_size = wheel_size, .driver = TimerOptions::Driver::external});
  };
  CHECK_THROWS_WITH_AS(make(0ns, 20), doctest::Contains("0 ns"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(-4ms, 20), doctest::Contains("-4000000"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(24h + 1ns, 20), doctest::Contains("86400000000001"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(1ms, 1), doctest::Contains("got 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(1ms, 65537), doctest::Contains("65537"), std::invalid_argument);
  CHECK_NOTHROW(make(1ns, 2));
  CHECK_NOTHROW(make(24h, 65536));
}

TEST_CASE(
    "system_timer.hpp: add() with a delay <= 0 hands nothing to the executor inside the call: "
    "the driver's next pass does, without the clock moving, and cancel() still withdraws it") {
  ManualClock clock;
  auto stash = std::make_shared<StashExecutor>();
  SystemTimer timer(
      TimerOptions{.clock = &clock, .executor = stash, .driver = TimerOptions::Driver::external});
  auto zero = purgatory::make_task<CountingTask>();
  auto negative = purgatory::make_task<CountingTask>();
  auto withdrawn = purgatory::make_task<CountingTask>();
  timer.add(zero, 0ns);
  timer.add(negative, -5ms);
  timer.add(withdrawn, 0ns);
  CHECK(stash->held() == 0);
  CHECK(timer.size() == 3);  // pending until the pass
  REQUIRE(timer.next_expiration().has_value());
  CHECK(*timer.next_expiration() <= clock.now());  // due: the driver must not sleep
  CHECK(withdrawn->cancel());
  CHECK(timer.advance_clock(Nanos::zero()));
  CHECK(stash->sizes() == std::vector<std::size_t>{2});  // one batch: both, the cancelled one not
  CHECK(timer.size() == 0);
  stash->run_all();
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
  ManualClock clock;
  auto stash = std::make_shared<StashExecutor>();
  SystemTimer timer(
      TimerOptions{.clock = &clock, .executor = stash, .driver = TimerOptions::Driver::external});
  std::vector<Nanos> ran_at;
  auto task = purgatory::make_task([&] { ran_at.push_back(clock.now()); });
  timer.add(task, 2ms);
  clock.advance(2ms);
  timer.advance_clock(Nanos::zero());
  REQUIRE(stash->held() == 1);
  timer.add(task, 10ms);
  stash->run_all();  // the withdrawn run
  CHECK(ran_at.empty());
  clock.advance(10ms);
  timer.advance_clock(Nanos::zero());
  stash->run_all();
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
  SystemTimer timer(TimerOptions{.clock = &clock,
                                 .executor = std::make_shared<purgatory::InlineExecutor>(),
                                 .driver = TimerOptions::Driver::external});
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
    m.timer.advance_clock(Nanos::zero());
    CHECK(past->runs == 1);
    auto negative = purgatory::make_task<CountingTask>();
    m.timer.add_at(negative, -1ms);
    m.timer.advance_clock(Nanos::zero());
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

TEST_CASE(
    "system_timer.hpp: reschedule() of a pending task moves it in place and returns true: no "
    "reference count change, one run at the new deadline") {
  ManualClock clock;
  auto stash = std::make_shared<StashExecutor>();
  SystemTimer timer(
      TimerOptions{.clock = &clock, .executor = stash, .driver = TimerOptions::Driver::external});
  auto advance = [&](Nanos by) {
    clock.advance(by);
    timer.advance_clock(Nanos::zero());
    stash->run_all();
  };
  std::vector<Nanos> ran_at;
  auto task = purgatory::make_task([&] { ran_at.push_back(clock.now()); });
  timer.add(task, 10ms);
  const auto refs = task->use_count();
  CHECK(timer.reschedule(*task, 4ms));  // in the wheel
  CHECK(task->use_count() == refs);
  advance(4ms);
  CHECK(ran_at == std::vector<Nanos>{4ms});
  timer.add(task, 1ms);
  clock.advance(1ms);
  timer.advance_clock(Nanos::zero());
  REQUIRE(stash->held() == 1);
  CHECK(timer.reschedule(*task, 3ms));  // expired, not yet started
  stash->run_all();                     // that run is withdrawn
  CHECK(ran_at.size() == 1);
  advance(3ms);
  CHECK(ran_at == std::vector<Nanos>{4ms, 8ms});
  advance(20ms);
  CHECK(ran_at.size() == 2);
}

TEST_CASE(
    "system_timer.hpp: reschedule() returns false and schedules nothing for a task never added, "
    "cancelled, or whose run already started (it ran at the old deadline)") {
  ManualTimer m;
  auto idle = purgatory::make_task<CountingTask>();
  CHECK_FALSE(m.timer.reschedule(*idle, 1ms));
  m.timer.add(idle, 5ms);
  CHECK(idle->cancel());
  CHECK_FALSE(m.timer.reschedule(*idle, 1ms));
  bool moved = true;
  std::vector<Nanos> ran_at;
  TaskRef self;
  self = purgatory::make_task([&] {
    ran_at.push_back(m.clock.now());
    moved = m.timer.reschedule(*self, 5ms);
  });
  m.timer.add(self, 2ms);
  for (int i = 0; i < 20; ++i)
    m.advance(1ms);
  CHECK_FALSE(moved);
  CHECK(ran_at == std::vector<Nanos>{2ms});
  CHECK(m.timer.size() == 0);
  CHECK(idle->runs == 0);
}

TEST_CASE(
    "system_timer.hpp: reschedule() racing the start of the run: true means one run at the new "
    "deadline, false means the run already started at the old one (exact interleavings)") {
  struct Case {
    const char* point;
    bool expect_moved;
  };
  for (const Case c : {Case{"ExpiredBatch::run_all: before the claim", true},
                       Case{"ExpiredBatch::run_all: claimed, before run", false}}) {
    INFO(c.point);
    ManualClock clock;
    auto stash = std::make_shared<StashExecutor>();
    SystemTimer timer(
        TimerOptions{.clock = &clock, .executor = stash, .driver = TimerOptions::Driver::external});
    std::vector<Nanos> ran_at;
    auto task = purgatory::make_task([&] { ran_at.push_back(clock.now()); });
    timer.add(task, 1ms);
    clock.advance(1ms);
    timer.advance_clock(Nanos::zero());
    bool moved = !c.expect_moved;
    bool first = true;
    RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                           .pause_probability = 0.0,
                           .actions = {{c.point, [&] {
                                          if (!std::exchange(first, false)) return;
                                          std::thread other(
                                              [&] { moved = timer.reschedule(*task, 5ms); });
                                          other.join();
                                        }}}});
    stash->run_all();
    CHECK(moved == c.expect_moved);
    for (int i = 0; i < 10; ++i) {
      clock.advance(1ms);
      timer.advance_clock(Nanos::zero());
      stash->run_all();
    }
    CHECK(ran_at == std::vector<Nanos>{c.expect_moved ? 6ms : 1ms});
    CHECK(timer.size() == 0);
  }
  // The claim lands between reschedule()'s look at the task and its taking it.
  ManualClock clock;
  auto stash = std::make_shared<StashExecutor>();
  SystemTimer timer(
      TimerOptions{.clock = &clock, .executor = stash, .driver = TimerOptions::Driver::external});
  std::atomic<int> runs{0};
  auto task = purgatory::make_task([&] { runs.fetch_add(1); });
  timer.add(task, 1ms);
  clock.advance(1ms);
  timer.advance_clock(Nanos::zero());
  Signal at_window;
  Signal claimed;
  bool first = true;
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"SystemTimer::schedule: state read", [&] {
                                        if (!std::exchange(first, false)) return;
                                        at_window.set();
                                        CHECK(claimed.wait());
                                      }}}});
  bool moved = true;
  std::thread rescheduler([&] { moved = timer.reschedule(*task, 5ms); });
  REQUIRE(at_window.wait());
  stash->run_all();  // claims and runs while reschedule() holds the timer's lock
  claimed.set();
  rescheduler.join();
  CHECK_FALSE(moved);
  CHECK(runs.load() == 1);
  CHECK(timer.size() == 0);
  CHECK_FALSE(task->is_pending());
}

TEST_CASE(
    "system_timer.hpp: reschedule() racing expiry on a 2-thread executor: one run either way, "
    "true leaves it pending for the new deadline, false means its run already started (seeded "
    "schedule, 40 "
    "rounds)") {
  std::uint64_t window_hits = 0;
  int moved_total = 0;
  for (std::uint64_t round = 0; round < 40; ++round) {
    const std::uint64_t seed = RaceSchedule::seed(round);
    INFO("seed " << seed);
    ManualClock clock;
    auto pool = std::make_shared<PoolExecutor>(2);
    SystemTimer timer(
        TimerOptions{.clock = &clock, .executor = pool, .driver = TimerOptions::Driver::external});
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 100us});
    std::atomic<int> runs{0};
    std::atomic<Nanos::rep> ran_at{-1};
    auto task = purgatory::make_task([&] {
      ran_at = clock.now().count();
      runs.fetch_add(1);
    });
    timer.add(task, 1ms);
    std::thread expirer([&] {
      clock.advance(1ms);
      timer.advance_clock(Nanos::zero());
    });
    std::this_thread::sleep_for(std::chrono::microseconds(seed % 200));
    const bool moved = timer.reschedule(*task, 50ms);
    // true: one run, scheduled at the new deadline; false: the old run has started.
    CHECK(task->is_pending() == moved);
    expirer.join();
    for (int i = 0; i < 60; ++i) {
      clock.advance(1ms);
      timer.advance_clock(Nanos::zero());
    }
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (runs.load() < 1 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::yield();
    pool->shutdown();
    CHECK(runs.load() == 1);
    if (moved) CHECK(ran_at.load() >= Nanos(50ms).count());  // 50 ms after a clock at 0 or 1 ms
    moved_total += moved ? 1 : 0;
    window_hits += schedule.hits("ExpiredBatch::run_all");
  }
  CHECK(window_hits > 0);
  MESSAGE("reschedule() won " << moved_total << " of 40 races");
}

TEST_CASE(
    "system_timer.hpp: reschedule() throws as add() does: std::invalid_argument for a bad delay "
    "or a task pending in another timer, TimerRejected when closed, or at max_pending for a task "
    "that must re-enter the wheel") {
  ManualTimer m(1ms, 20, /*max_pending=*/1);
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 5ms);
  CHECK_THROWS_AS((void)m.timer.reschedule(*task, SystemTimer::kMaxDelay + 1ns),
                  std::invalid_argument);
  CHECK(task->is_pending());  // unchanged
  ManualTimer other;
  CHECK_THROWS_WITH_AS((void)other.timer.reschedule(*task, 1ms), doctest::Contains("another timer"),
                       std::invalid_argument);

  // At max_pending, a task expired but not started must re-enter the wheel: refused, and its
  // pending run is left as it was.
  ManualClock clock;
  auto stash = std::make_shared<StashExecutor>();
  SystemTimer full(TimerOptions{.clock = &clock,
                                .executor = stash,
                                .driver = TimerOptions::Driver::external,
                                .max_pending = 1});
  auto expired = purgatory::make_task<CountingTask>();
  full.add(expired, 1ms);
  clock.advance(1ms);
  full.advance_clock(Nanos::zero());
  full.add(purgatory::make_task<CountingTask>(), 1h);  // the wheel is full
  try {
    (void)full.reschedule(*expired, 5ms);
    FAIL("reschedule() into a full wheel must throw");
  } catch (const TimerRejected& e) {
    CHECK(e.reason() == TimerRejected::Reason::pending_limit);
  }
  stash->run_all();
  CHECK(expired->runs == 1);  // the run it had still happens

  m.timer.close();
  try {
    (void)m.timer.reschedule(*task, 1ms);
    FAIL("reschedule() after close() must throw");
  } catch (const TimerRejected& e) {
    CHECK(e.reason() == TimerRejected::Reason::closed);
  }
}

TEST_CASE(
    "system_timer.hpp: advance_clock(): max_wait <= 0 never blocks, it returns whether any "
    "bucket was due") {
  ManualTimer m;
  CHECK_FALSE(m.timer.advance_clock(Nanos::zero()));
  CHECK_FALSE(m.timer.advance_clock(-1s));
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 2ms);
  m.clock.advance(1ms);
  CHECK_FALSE(m.timer.advance_clock(Nanos::zero()));
  m.clock.advance(1ms);
  CHECK(m.timer.advance_clock(Nanos::zero()));
  CHECK(task->runs == 1);
}

TEST_CASE(
    "system_timer.hpp: advance_clock(Nanos::max()) waits until something is due, or until "
    "close()") {
  {
    ManualTimer m;
    auto task = purgatory::make_task<CountingTask>();
    m.timer.add(task, 5ms);
    std::atomic<bool> returned{false};
    Nanos returned_at{-1};
    std::thread waiter([&] {
      CHECK(m.timer.advance_clock(Nanos::max()));
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
      result = m.timer.advance_clock(Nanos::max());
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
  ManualTimer m;
  m.timer.add(purgatory::make_task<CountingTask>(), 1h);
  std::atomic<bool> done{false};
  Nanos returned_at{-1};
  bool result = true;
  std::thread waiter([&] {
    result = m.timer.advance_clock(5ms);
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
  ManualClock clock;
  auto stash = std::make_shared<StashExecutor>();
  SystemTimer timer(
      TimerOptions{.clock = &clock, .executor = stash, .driver = TimerOptions::Driver::external});
  for (const auto d : {1ms, 5ms, 25ms, 30ms, 500ms})
    timer.add(purgatory::make_task<CountingTask>(), d);
  CHECK(timer.size() == 5);
  CHECK(timer.size_per_level() == std::vector<std::size_t>{2, 2, 1});
  clock.advance(1ms);
  timer.advance_clock(Nanos::zero());
  CHECK(stash->held() == 1);
  CHECK(timer.size() == 4);
  stash->run_all();
  timer.close();
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
  SystemTimer timer(TimerOptions{.clock = &clock,
                                 .executor = std::make_shared<purgatory::InlineExecutor>(),
                                 .driver = TimerOptions::Driver::external});
  int calls = 0;
  const Watchdog watchdog("wakeup hook calling the timer");
  timer.set_wakeup_hook([&] {
    ++calls;
    (void)timer.size();  // no lock held
  });
  CHECK_FALSE(timer.arm().has_value());
  timer.add(purgatory::make_task<CountingTask>(), 10ms);
  CHECK(calls == 1);  // earlier than "nothing"
  CHECK(timer.arm() == std::optional<Nanos>(10ms));
  timer.add(purgatory::make_task<CountingTask>(), 15ms);
  CHECK(calls == 1);  // not earlier
  timer.add(purgatory::make_task<CountingTask>(), 5ms);
  CHECK(calls == 2);
  // All in the finest level (1 ms x 20): nothing to cascade, arm() is the earliest bucket.
  CHECK(timer.arm() == std::optional<Nanos>(5ms));
  CHECK(timer.arm() == timer.next_expiration());
  // A task in a coarse bucket (20 ms and up) is cascaded ahead of time: arm() may ask for that
  // step before the earliest bucket, never later, and once the driver made its passes it is the
  // earliest bucket again.
  timer.add(purgatory::make_task<CountingTask>(), 30ms);
  std::optional<Nanos> armed = timer.arm();
  REQUIRE(armed.has_value());
  CHECK(*armed <= 5ms);
  for (int pass = 0; pass < 20 && armed != timer.next_expiration(); ++pass) {
    if (*armed > clock.now()) clock.advance(*armed - clock.now());
    CHECK_FALSE(timer.advance_clock(Nanos::zero()));  // a cascade step: nothing was due yet
    armed = timer.arm();
    REQUIRE(armed.has_value());
  }
  CHECK(armed == std::optional<Nanos>(5ms));
  CHECK(calls == 2);
}

TEST_CASE(
    "system_timer.hpp: no lock is held while a task runs or the executor is called: both may call "
    "every member, and advance_clock() from an inline task does not deadlock") {
  struct Calling final : purgatory::Executor {
    SystemTimer* timer = nullptr;
    TaskRef other = purgatory::make_task<CountingTask>();
    void execute(ExpiredBatch& batch) override {
      call_every_member(*timer, other);
      batch.run_all();
    }
  };
  auto calling = std::make_shared<Calling>();
  ManualClock clock;
  SystemTimer timer(
      TimerOptions{.clock = &clock, .executor = calling, .driver = TimerOptions::Driver::external});
  calling->timer = &timer;
  const Watchdog watchdog("a task and an executor calling the timer");
  auto other = purgatory::make_task<CountingTask>();
  bool ran = false;
  timer.add(purgatory::make_task([&] {
              call_every_member(timer, other);
              (void)timer.advance_clock(Nanos::zero());
              ran = true;
            }),
            1ms);
  clock.advance(1ms);
  CHECK(timer.advance_clock(Nanos::zero()));
  CHECK(ran);
  timer.close();
}

TEST_CASE(
    "system_timer.hpp: on_task_error receives what a task throws, with none, the error is "
    "printed to stderr naming the timer, and the timer keeps running") {
  ManualClock clock;
  const std::string printed = capture_stderr([&] {
    SystemTimer timer(TimerOptions{.name = "loud",
                                   .clock = &clock,
                                   .executor = std::make_shared<purgatory::InlineExecutor>(),
                                   .driver = TimerOptions::Driver::external});
    timer.add(purgatory::make_task([] { throw std::runtime_error("disk on fire"); }), 1ms);
    auto after = purgatory::make_task<CountingTask>();
    timer.add(after, 2ms);
    clock.advance(2ms);
    timer.advance_clock(Nanos::zero());
    CHECK(after->runs == 1);
  });
  CHECK(printed.find("loud") != std::string::npos);
  CHECK(printed.find("disk on fire") != std::string::npos);
}

TEST_CASE(
    "system_timer.hpp: thread-safe: 4 threads add, add_at, reschedule, cancel and query one timer "
    "while another drives it onto a 2-thread executor (seeded schedule, 6 rounds)") {
  std::uint64_t hits = 0;
  for (std::uint64_t round = 0; round < 6; ++round) {
    const std::uint64_t seed = RaceSchedule::seed(round);
    INFO("seed " << seed);
    ManualClock clock;
    auto pool = std::make_shared<PoolExecutor>(2);
    SystemTimer timer(
        TimerOptions{.clock = &clock, .executor = pool, .driver = TimerOptions::Driver::external});
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.2, .max_pause = 50us});
    std::vector<purgatory::Ref<CountingTask>> tasks;
    for (int i = 0; i < 64; ++i)
      tasks.push_back(purgatory::make_task<CountingTask>());
    std::atomic<int> scheduled{0};  // adds and successful reschedules
    std::atomic<bool> stop{false};
    std::thread driver([&] {
      while (!stop.load()) {
        clock.advance(1ms);
        timer.advance_clock(Nanos::zero());
      }
    });
    std::vector<std::thread> users;
    for (int u = 0; u < 4; ++u) {
      users.emplace_back([&, u] {
        std::mt19937_64 rng(seed * 31 + static_cast<std::uint64_t>(u));
        for (int op = 0; op < 400; ++op) {
          auto& t = tasks[rng() % tasks.size()];
          const Nanos delay{static_cast<Nanos::rep>(rng() % 4'000'000) - 500'000};
          switch (rng() % 7) {
            case 0:
              timer.add(t, delay);
              scheduled.fetch_add(1);
              break;
            case 1:
              timer.add_at(t, clock.now() + delay);
              scheduled.fetch_add(1);
              break;
            case 2:
              if (timer.reschedule(*t, delay)) scheduled.fetch_add(1);
              break;
            case 3:
              (void)t->cancel();
              break;
            case 4:
              (void)timer.size();
              (void)timer.next_expiration();
              break;
            case 5:
              (void)timer.size_per_level();
              (void)t->is_pending();
              break;
            default:
              (void)timer.wheel_memory_bytes();
              (void)timer.wakeups();
          }
        }
      });
    }
    for (std::thread& t : users)
      t.join();
    stop = true;
    driver.join();
    const auto handed_back = timer.close();
    pool->shutdown();
    int runs = 0;
    for (auto& t : tasks) {
      CHECK_FALSE(t->is_pending());
      runs += t->runs.load();
    }
    CHECK(runs + static_cast<int>(handed_back.size()) <= scheduled.load());
    CHECK(timer.size() == 0);
    hits += schedule.hits("SystemTimer::");
  }
  CHECK(hits > 0);
}
