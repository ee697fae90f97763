// Tests of purgatory/timer/system_timer.hpp: deadlines, threads, options, errors of the
// constructor, thread-safety. The add path, reschedule() and the drivers have files of their own
// (system_timer_*_test.cpp), close() and drain() are in system_timer_shutdown_test.cpp, and the
// tests that need the race points are in races/.
#include "purgatory/timer/external_driver.hpp"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/system_timer.hpp"
#include "timer_contract_support.hpp"
#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

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
    "system_timer.hpp: on_task_error receives what a task throws, with none, the error is "
    "printed to stderr naming the timer, and the timer keeps running") {
  ManualClock clock;
  StderrCapture err;
  {
    SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>(), {.name = "loud"}));
    ExternalDriver driver(timer);
    timer.add(purgatory::make_task([] { throw std::runtime_error("disk on fire"); }), 1ms);
    auto after = purgatory::make_task<CountingTask>();
    timer.add(after, 2ms);
    clock.advance(2ms);
    driver.advance_clock();
    CHECK(after->runs == 1);
  }
  const std::string printed = err.text();
  CHECK(printed.find("loud") != std::string::npos);
  CHECK(printed.find("disk on fire") != std::string::npos);
}

namespace {

template <class F>
purgatory::TaskRef task_of(F f) {
  return purgatory::make_task(std::move(f));
}

}  // namespace

TEST_CASE("SystemTimer: tasks with negative delays -5..-1 ms all run at once") {
  SystemTimer timer;  // reaper thread + executor thread, steady clock
  Latch latch(5);
  std::mutex mu;
  std::set<int> output;
  for (int i = -5; i < 0; ++i) {
    timer.add(task_of([&, i] {
                std::lock_guard<std::mutex> guard(mu);
                output.insert(i);
                latch.count_down();
              }),
              std::chrono::milliseconds(i));
  }
  REQUIRE(latch.wait_for(10s));
  CHECK(output == std::set<int>{-5, -4, -3, -2, -1});
}

TEST_CASE("SystemTimer: 585 tasks with delays 0..499 ms run exactly once, in order, none early") {
  ManualTimer m;
  std::vector<int> ids;
  std::vector<std::pair<int, Nanos>> output;  // (delay in ms, clock time it ran)
  auto add = [&](int delay_ms) {
    ids.push_back(delay_ms);
    m.timer.add(task_of([&, delay_ms] { output.emplace_back(delay_ms, m.clock.now()); }),
                std::chrono::milliseconds(delay_ms));
  };
  for (int i = 0; i < 5; ++i)
    add(i);
  for (int i = 10; i < 100; ++i) {
    add(i);
    add(i);  // two tasks share each of these delays
  }
  for (int i = 100; i < 500; ++i)
    add(i);
  REQUIRE(ids.size() == 585);
  CHECK(output.empty());  // none ran inside add(), not even those due at once
  m.advance(0ms);         // the 0 ms tasks run at the first pass, on time
  while (m.clock.now() < 600ms)
    m.advance(1ms);
  std::sort(ids.begin(), ids.end());
  REQUIRE(output.size() == 585);
  for (std::size_t k = 0; k < output.size(); ++k) {
    CHECK(output[k].first == ids[k]);
    // Integral ms deadlines on a 1 ms tick: each runs exactly at its deadline.
    CHECK(output[k].second == std::chrono::milliseconds(output[k].first));
  }
  CHECK(m.timer.size() == 0);
}

TEST_CASE("SystemTimer: 585 tasks on the real clock never run before their deadline") {
  SystemTimer timer;
  Latch latch(585);
  std::atomic<int> early{0};
  auto add = [&](int delay_ms) {
    const auto added = std::chrono::steady_clock::now();
    const auto delay = std::chrono::milliseconds(delay_ms);
    timer.add(task_of([&, added, delay] {
                if (std::chrono::steady_clock::now() - added < delay) early.fetch_add(1);
                latch.count_down();
              }),
              delay);
  };
  for (int i = 0; i < 5; ++i)
    add(i);
  for (int i = 10; i < 100; ++i) {
    add(i);
    add(i);
  }
  for (int i = 100; i < 500; ++i)
    add(i);
  REQUIRE(latch.wait_for(30s));
  CHECK(early.load() == 0);
}

TEST_CASE("SystemTimer: a deadline between ticks runs at the next tick boundary, never before") {
  ManualTimer m(10ms);
  m.clock.advance(3ms);  // start off the tick grid
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 15ms);  // deadline 18 ms; rounded up to the 20 ms boundary
  m.advance(14ms);          // 17 ms
  CHECK(task->runs == 0);
  m.advance(1ms);  // 18 ms: due, but the wheel only fires on tick boundaries
  m.advance(1ms);  // 19 ms
  CHECK(task->runs == 0);
  m.advance(1ms);  // 20 ms
  CHECK(task->runs == 1);
}

TEST_CASE("SystemTimer: cancel() reports whether it stopped the run") {
  ManualTimer m;
  auto task = purgatory::make_task<CountingTask>();
  CHECK_FALSE(task->cancel());  // never scheduled
  m.timer.add(task, 10ms);
  CHECK(task->is_pending());
  CHECK(m.timer.size() == 1);
  CHECK(task->cancel());
  CHECK_FALSE(task->cancel());  // already cancelled
  CHECK_FALSE(task->is_pending());
  CHECK(m.timer.size() == 0);
  m.advance(20ms);
  CHECK(task->runs == 0);

  m.timer.add(task, 5ms);  // a cancelled task can be scheduled again
  m.advance(5ms);
  CHECK(task->runs == 1);
  CHECK_FALSE(task->cancel());  // it ran
}

// The task's reference count shares an atomic word with its scheduling state: every transition
// must keep the count right, or a task leaks or is freed under the timer.
TEST_CASE("SystemTimer: the timer holds one reference exactly while a task is pending") {
  ManualTimer m;
  int destroyed = 0;
  struct Tracked : CountingTask {
    explicit Tracked(int& d) : destroyed(d) {}
    ~Tracked() override { ++destroyed; }
    int& destroyed;
  };
  auto task = purgatory::make_task<Tracked>(destroyed);
  CHECK(task->use_count() == 1);
  m.timer.add(task, 10ms);
  CHECK(task->use_count() == 2);
  m.timer.add(task, 20ms);  // moved: still one reference for the timer
  CHECK(task->use_count() == 2);
  CHECK(task->cancel());
  CHECK(task->use_count() == 1);
  m.timer.add(task, 5ms);
  m.advance(5ms);  // expired and run: the run's reference is gone with it
  CHECK(task->runs == 1);
  CHECK(task->use_count() == 1);
  m.timer.add(task, 5ms);
  auto handed_back = m.timer.close();  // close() passes the timer's reference on
  REQUIRE(handed_back.size() == 1);
  CHECK(task->use_count() == 2);
  handed_back.clear();
  CHECK(task->use_count() == 1);
  CHECK(destroyed == 0);

  // Fire and forget: the timer's reference is the last one, dropped by cancel() or by the run.
  ManualTimer n;
  n.timer.add(purgatory::make_task<Tracked>(destroyed), 10ms);
  n.advance(10ms);
  CHECK(destroyed == 1);
  Tracked* raw = nullptr;
  {
    auto t = purgatory::make_task<Tracked>(destroyed);
    raw = t.get();
    n.timer.add(t, 10ms);
  }
  CHECK(destroyed == 1);
  CHECK(raw->cancel());  // drops the last reference: destroyed inside cancel()
  CHECK(destroyed == 2);
  task.reset();
  CHECK(destroyed == 3);
}

TEST_CASE("SystemTimer: cancel() from inside the task's own run returns false") {
  ManualTimer m;
  bool cancelled = true;
  purgatory::TimerTask* self = nullptr;
  auto task = task_of([&] { cancelled = self->cancel(); });
  self = task.get();
  m.timer.add(task, 1ms);
  m.advance(1ms);
  CHECK_FALSE(cancelled);
}

TEST_CASE("SystemTimer: adding a scheduled task again moves it, it runs once") {
  ManualTimer m;
  auto task = purgatory::make_task<CountingTask>();
  m.timer.add(task, 10ms);
  m.timer.add(task, 50ms);
  CHECK(m.timer.size() == 1);
  m.advance(10ms);
  CHECK(task->runs == 0);
  m.advance(40ms);
  CHECK(task->runs == 1);
  m.advance(100ms);
  CHECK(task->runs == 1);
  // And moving it earlier works too.
  m.timer.add(task, 30ms);
  m.timer.add(task, 2ms);
  m.advance(2ms);
  CHECK(task->runs == 2);
  m.advance(50ms);
  CHECK(task->runs == 2);
}

namespace {

// Keeps expired jobs until the test runs them: makes the "expired, not yet started" window
// deterministic.
struct HoldingExecutor : purgatory::Executor {
  std::vector<purgatory::ExpiredBatch> held;
  void execute(purgatory::ExpiredBatch& batch) override {
    held.push_back(std::move(batch));
    batch = purgatory::ExpiredBatch();
  }
  void run_all() {
    auto batches = std::move(held);
    held.clear();
    for (auto& b : batches)
      b.run_all();
  }
};

using HoldingTimer = DrivenTimer<HoldingExecutor>;

}  // namespace

TEST_CASE("SystemTimer: cancel racing expiry: an expired task not yet started can be cancelled") {
  HoldingTimer h;
  auto task = purgatory::make_task<CountingTask>();
  h.timer.add(task, 5ms);
  h.step(5ms);
  REQUIRE(h.executor->held.size() == 1);
  CHECK(task->is_pending());
  CHECK(task->cancel());  // stopped before it started
  h.executor->run_all();
  CHECK(task->runs == 0);

  h.timer.add(task, 5ms);
  h.step(5ms);
  h.executor->run_all();  // started: now cancel is too late
  CHECK(task->runs == 1);
  CHECK_FALSE(task->cancel());
}

TEST_CASE("SystemTimer: re-adding an expired, not yet started task withdraws that run") {
  HoldingTimer h;
  auto task = purgatory::make_task<CountingTask>();
  h.timer.add(task, 5ms);
  h.step(5ms);
  REQUIRE(h.executor->held.size() == 1);
  h.timer.add(task, 20ms);  // moved: the held job must not run it
  h.executor->run_all();
  CHECK(task->runs == 0);
  h.step(19ms);
  h.executor->run_all();
  CHECK(task->runs == 0);
  h.step(1ms);
  h.executor->run_all();
  CHECK(task->runs == 1);
}

TEST_CASE("SystemTimer: an exception thrown by a task is reported and the timer keeps running") {
  std::mutex mu;
  std::vector<std::string> errors;
  SystemTimer timer(TimerOptions{
      .name = "throwing", .on_task_error = [&](const purgatory::TimerTask&, std::exception_ptr e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          std::lock_guard<std::mutex> guard(mu);
          errors.emplace_back(ex.what());
        }
      }});
  Latch latch(1);
  timer.add(task_of([] { throw std::runtime_error("boom from task 1"); }), 1ms);
  timer.add(task_of([&] { latch.count_down(); }), 5ms);
  REQUIRE(latch.wait_for(10s));
  std::lock_guard<std::mutex> guard(mu);
  CHECK(errors == std::vector<std::string>{"boom from task 1"});
}

TEST_CASE("SystemTimer: max_pending 3 rejects the 4th add with a clear error") {
  ManualTimer m(1ms, 20, 3);
  std::vector<purgatory::TaskRef> tasks;
  for (int i = 0; i < 4; ++i)
    tasks.push_back(purgatory::make_task<CountingTask>());
  for (int i = 0; i < 3; ++i)
    m.timer.add(tasks[static_cast<std::size_t>(i)], 10ms);
  try {
    m.timer.add(tasks[3], 10ms);
    FAIL("expected TimerRejected");
  } catch (const TimerRejected& e) {
    CHECK(e.reason() == TimerRejected::Reason::pending_limit);
    CHECK(std::string(e.what()).find("3 tasks pending") != std::string::npos);
  }
  CHECK_FALSE(tasks[3]->is_pending());
  m.timer.add(tasks[0], 20ms);  // moving a pending task needs no new slot
  CHECK(tasks[0]->cancel());
  m.timer.add(tasks[3], 10ms);  // a slot was freed
  CHECK(m.timer.size() == 3);
}

TEST_CASE("SystemTimer: bad options and delays get std::invalid_argument naming the value") {
  CHECK_THROWS_WITH_AS(SystemTimer(TimerOptions{.tick = 0ms}),
                       doctest::Contains("tick must be in (0, 1 day], got 0 ns"),
                       std::invalid_argument);
  CHECK_THROWS_AS(SystemTimer(TimerOptions{.tick = -1ms}), std::invalid_argument);
  CHECK_THROWS_AS(SystemTimer(TimerOptions{.tick = 25h}), std::invalid_argument);
  CHECK_THROWS_WITH_AS(SystemTimer(TimerOptions{.wheel_size = 0}), doctest::Contains("got 0"),
                       std::invalid_argument);
  CHECK_THROWS_AS(SystemTimer(TimerOptions{.wheel_size = 65537}), std::invalid_argument);

  ManualTimer m;
  auto task = purgatory::make_task<CountingTask>();
  CHECK_THROWS_WITH_AS(m.timer.add(task, SystemTimer::kMaxDelay + 1ns),
                       doctest::Contains("exceeds the maximum"), std::invalid_argument);
  CHECK_THROWS_AS(m.timer.add(purgatory::TaskRef(), 1ms), std::invalid_argument);
  CHECK_FALSE(task->is_pending());

  purgatory::ManualClock late(Nanos{std::numeric_limits<std::int64_t>::max() - 1'000'000});
  SystemTimer near_end(driven_by_hand(late, std::make_shared<purgatory::InlineExecutor>()));
  CHECK_THROWS_WITH_AS(near_end.add(task, 24h), doctest::Contains("overflows the clock"),
                       std::invalid_argument);
}

TEST_CASE("SystemTimer: delays of 3 days and of kMaxDelay work through the overflow wheels") {
  ManualTimer m;
  auto days = purgatory::make_task<CountingTask>();
  auto max = purgatory::make_task<CountingTask>();
  m.timer.add(days, 72h);
  m.timer.add(max, SystemTimer::kMaxDelay);
  CHECK(m.timer.size_per_level().size() > 5);
  m.advance(72h - 1ms);
  CHECK(days->runs == 0);
  m.advance(1ms);
  CHECK(days->runs == 1);
  m.advance(SystemTimer::kMaxDelay - 72h - 1ms);
  CHECK(max->runs == 0);
  m.advance(1ms);
  CHECK(max->runs == 1);
}

TEST_CASE("SystemTimer: close() hands back the 10 pending tasks, none runs, adds are refused") {
  ManualTimer m;
  std::vector<purgatory::Ref<CountingTask>> tasks;
  for (int i = 0; i < 10; ++i) {
    tasks.push_back(purgatory::make_task<CountingTask>());
    m.timer.add(tasks.back(), std::chrono::milliseconds(10 + i * 1000));
  }
  const auto handed = m.timer.close();
  CHECK(handed.size() == 10);
  for (const auto& t : tasks)
    CHECK_FALSE(t->is_pending());
  CHECK(m.timer.size() == 0);
  CHECK(m.timer.close().empty());
  try {
    m.timer.add(tasks[0], 1ms);
    FAIL("expected TimerRejected");
  } catch (const TimerRejected& e) {
    CHECK(e.reason() == TimerRejected::Reason::closed);
  }
  m.clock.advance(1h);
  m.driver.advance_clock(Nanos::zero());
  for (const auto& t : tasks)
    CHECK(t->runs == 0);
}

TEST_CASE("SystemTimer: an idle timer's reaper makes no wake-ups over one second") {
  SystemTimer timer;
  Latch latch(1);
  timer.add(task_of([&] { latch.count_down(); }), 5ms);
  REQUIRE(latch.wait_for(10s));
  // The reaper has seen the wheel empty; from now on it must sleep without waking.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (timer.size() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(20ms);  // let the reaper reach its wait
  const auto before = timer.wakeups();
  std::this_thread::sleep_for(1s);
  CHECK(timer.wakeups() == before);
  // And it still wakes for new work.
  Latch again(1);
  timer.add(task_of([&] { again.count_down(); }), 1ms);
  CHECK(again.wait_for(10s));
  CHECK(timer.wakeups() > before);
}

TEST_CASE("SystemTimer: a reaper thread on a manual clock runs tasks when the clock is advanced") {
  purgatory::ManualClock clock;
  SystemTimer timer(TimerOptions{.clock = &clock});
  Latch latch(1);
  std::atomic<bool> ran_early{false};
  timer.add(task_of([&] {
              if (clock.now() < 5ms) ran_early = true;
              latch.count_down();
            }),
            5ms);
  clock.advance(4ms);
  clock.advance(1ms);
  REQUIRE(latch.wait_for(10s));
  CHECK_FALSE(ran_early.load());
}

TEST_CASE("SystemTimer: inline executor runs on the advancing thread, the default on its own") {
  ManualTimer m;
  std::thread::id ran_on;
  m.timer.add(task_of([&] { ran_on = std::this_thread::get_id(); }), 1ms);
  m.advance(1ms);
  CHECK(ran_on == std::this_thread::get_id());

  SystemTimer threaded;
  Latch latch(1);
  std::thread::id ran_on_executor;
  threaded.add(task_of([&] {
                 ran_on_executor = std::this_thread::get_id();
                 latch.count_down();
               }),
               1ms);
  REQUIRE(latch.wait_for(10s));
  CHECK(ran_on_executor != std::this_thread::get_id());
}

TEST_CASE("SystemTimer: a 20 ms task on the real clock runs at least 20 ms after add") {
  SystemTimer timer;
  Latch latch(1);
  std::chrono::steady_clock::time_point ran;
  const auto added = std::chrono::steady_clock::now();
  timer.add(task_of([&] {
              ran = std::chrono::steady_clock::now();
              latch.count_down();
            }),
            20ms);
  REQUIRE(latch.wait_for(10s));
  CHECK(ran - added >= 20ms);
}

TEST_CASE("SystemTimer: library memory per pending task is at most 49 bytes") {
  // The entry is the task's own base class; bucket headers are shared by all tasks.
  struct Bare : purgatory::TimerTask {
    void run() override {}
  };
  static_assert(sizeof(Bare) == sizeof(purgatory::TimerTask));
  purgatory::ManualClock clock;
  // Default tick and wheel size.
  purgatory::SystemTimer timer(
      driven_by_hand(clock, std::make_shared<purgatory::InlineExecutor>()));
  constexpr std::size_t kTasks = 1'000'000;
  std::vector<purgatory::Ref<Bare>> tasks;
  tasks.reserve(kTasks);
  std::mt19937_64 rng(7);
  for (std::size_t i = 0; i < kTasks; ++i) {
    tasks.push_back(purgatory::make_task<Bare>());
    timer.add(tasks.back(), std::chrono::milliseconds(1 + rng() % 60'000));
  }
  const double per_task = static_cast<double>(sizeof(purgatory::TimerTask)) +
                          static_cast<double>(timer.wheel_memory_bytes()) / kTasks;
  MESSAGE("bytes per pending task: " << per_task << " (entry " << sizeof(purgatory::TimerTask)
                                     << ", wheel " << timer.wheel_memory_bytes() << " bytes over "
                                     << timer.size_per_level().size() << " levels)");
  CHECK(sizeof(purgatory::TimerTask) <= 48);
  CHECK(per_task <= 49.0);
  std::size_t cancelled = 0;
  for (auto& t : tasks)
    cancelled += t->cancel() ? 1 : 0;
  CHECK(cancelled == kTasks);
}

TEST_CASE("SystemTimer::add_at: absolute deadlines, past ones at once, never early") {
  ManualTimer m;
  m.advance(100ms);
  auto past = purgatory::make_task<CountingTask>();
  m.timer.add_at(past, 40ms);  // already passed: due at the next pass, never inside add_at()
  CHECK(past->runs == 0);
  m.advance(0ms);
  CHECK(past->runs == 1);
  auto future = purgatory::make_task<CountingTask>();
  m.timer.add_at(future, 100ms + 2500us);  // rounded up to the 103 ms tick
  m.advance(2ms);
  CHECK(future->runs == 0);
  m.advance(1ms);
  CHECK(future->runs == 1);
  auto distant = purgatory::make_task<CountingTask>();
  CHECK_THROWS_WITH_AS(m.timer.add_at(distant, SystemTimer::kMaxDelay + 1s),
                       doctest::Contains("more than the maximum delay"), std::invalid_argument);
  CHECK_FALSE(distant->is_pending());
}
