// Contract tests for purgatory/timer/timer_task.hpp: one test per promise (docs/contracts.md).
#include "purgatory/timer/timer_task.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "thread_slot.hpp"
#include "threads.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "timer_task.hpp: make_task() builds a subclass or a callable task, owned by the one "
    "reference it returns") {
  ManualTimer m;
  auto sub = purgatory::make_task<CountingTask>();
  int calls = 0;
  auto callable = purgatory::make_task([&] { ++calls; });
  CHECK(sub->use_count() == 1);
  CHECK(callable->use_count() == 1);
  m.timer.add(sub, 1ms);
  m.timer.add(callable, 1ms);
  m.advance(1ms);
  CHECK(sub->runs == 1);
  CHECK(calls == 1);
}

TEST_CASE(
    "timer_task.hpp: make_task(callable) stores the callable inline: one block per task, from "
    "the heap at most once, then reused from the thread's pool") {
  if (!CountAllocations::available()) {
    MESSAGE("allocations are not counted under ThreadSanitizer (release and ASan builds count)");
    return;
  }
  std::array<char, 200> payload{};  // a capture larger than any small-buffer optimisation
  payload[0] = 1;
  const auto make = [&payload] { return purgatory::make_task([payload] { (void)payload; }); };
  TaskRef task;
  {
    const CountAllocations allocations;
    task = make();
    CHECK(allocations.count() <= 1);
  }
  task.reset();  // its block goes to this thread's pool
  {
    const CountAllocations allocations;
    task = make();
    // Under AddressSanitizer the pool is off, so that a use after free is still caught.
    CHECK(allocations.count() == (purgatory::detail::kTaskPoolOn ? 0U : 1U));
  }
}

TEST_CASE(
    "timer_task.hpp: use_count() counts the timer's reference, held exactly while the task is "
    "scheduled or waiting for its executor") {
  DrivenTimer<StashExecutor> s({.name = "stash"});
  auto task = purgatory::make_task<CountingTask>();
  CHECK(task->use_count() == 1);
  s.timer.add(task, 5ms);
  CHECK(task->use_count() == 2);  // scheduled
  s.step(5ms);
  REQUIRE(s.executor->held() == 1);
  CHECK(task->use_count() == 2);  // expired, waiting for its executor
  s.executor->run_all();
  CHECK(task->runs == 1);
  CHECK(task->use_count() == 1);  // ran: released
  s.timer.add(task, 5ms);
  CHECK(task->cancel());
  CHECK(task->use_count() == 1);  // cancelled: released
  s.timer.add(task, 5ms);
  {
    auto handed_back = s.timer.close();
    REQUIRE(handed_back.size() == 1);
    CHECK(task->use_count() == 2);  // the caller's and the handed-back one
  }
  CHECK(task->use_count() == 1);
}

TEST_CASE(
    "timer_task.hpp: fire and forget: a caller may drop its reference right after add(), the "
    "task runs once, then is destroyed") {
  ManualTimer m;
  std::atomic<bool> destroyed{false};
  std::atomic<int>* runs = nullptr;
  {
    auto task = purgatory::make_task<Tracked>(destroyed);
    runs = &task->runs;
    m.timer.add(task, 3ms);
  }
  CHECK_FALSE(destroyed.load());  // the timer keeps it alive while pending
  m.advance(2ms);
  CHECK_FALSE(destroyed.load());
  m.advance(1ms);
  CHECK(destroyed.load());  // ran, then its last reference went
  (void)runs;
}

TEST_CASE(
    "timer_task.hpp: a running task is never destroyed under the executor, even when run() drops "
    "the last reference held outside the timer") {
  ManualTimer m;
  std::atomic<bool> destroyed{false};
  bool destroyed_during_run = true;
  int member_seen = 0;
  struct Self : TimerTask {
    Self(std::atomic<bool>& d, TaskRef& h, bool& during, int& seen)
        : destroyed(d), holder(h), destroyed_during(during), seen_(seen) {}
    ~Self() override { destroyed = true; }
    void run() override {
      holder.reset();  // the last reference outside the timer
      destroyed_during = destroyed.load();
      seen_ = value;  // touches the object after the reset
    }
    std::atomic<bool>& destroyed;
    TaskRef& holder;
    bool& destroyed_during;
    int& seen_;
    int value = 42;
  };
  TaskRef holder;
  holder = purgatory::make_task<Self>(destroyed, holder, destroyed_during_run, member_seen);
  m.timer.add(holder, 1ms);
  m.advance(1ms);
  CHECK_FALSE(destroyed_during_run);
  CHECK(member_seen == 42);
  CHECK(destroyed.load());  // after the run, when the executor let go
}

TEST_CASE(
    "timer_task.hpp: cancel() returns false when nothing is pending: never scheduled, already "
    "cancelled, or already run") {
  ManualTimer m;
  auto task = purgatory::make_task<CountingTask>();
  CHECK_FALSE(task->cancel());  // never scheduled
  m.timer.add(task, 2ms);
  CHECK(task->cancel());
  CHECK_FALSE(task->cancel());  // already cancelled
  m.timer.add(task, 2ms);
  m.advance(2ms);
  CHECK(task->runs == 1);
  CHECK_FALSE(task->cancel());  // already ran
}

TEST_CASE(
    "timer_task.hpp: cancel() of a pending task returns true and the task does not run for that "
    "schedule, whether in the wheel or expired and waiting for its executor") {
  DrivenTimer<StashExecutor> s({.name = "stash"});
  auto in_wheel = purgatory::make_task<CountingTask>();
  auto expired = purgatory::make_task<CountingTask>();
  s.timer.add(in_wheel, 10ms);
  s.timer.add(expired, 2ms);
  s.step(2ms);
  REQUIRE(s.executor->held() == 1);
  CHECK(in_wheel->cancel());
  CHECK(expired->cancel());
  s.executor->run_all();
  s.step(20ms);
  s.executor->run_all();
  CHECK(in_wheel->runs == 0);
  CHECK(expired->runs == 0);
  CHECK(s.timer.size() == 0);
}

TEST_CASE(
    "timer_task.hpp: cancel() once the run started returns false and the run completes "
    "normally, from the task's own run() or from another thread") {
  SUBCASE("from run()") {
    ManualTimer m;
    bool cancelled = true;
    bool finished = false;
    TaskRef task;
    task = purgatory::make_task([&] {
      cancelled = task->cancel();
      finished = true;
    });
    m.timer.add(task, 1ms);
    m.advance(1ms);
    CHECK_FALSE(cancelled);
    CHECK(finished);
  }
  SUBCASE("from another thread") {
    ManualTimer m(TimerOptions::Concurrency::thread_safe);
    Signal in_run;
    Signal release;
    std::atomic<bool> finished{false};
    auto task = purgatory::make_task([&] {
      in_run.set();
      CHECK(release.wait());
      finished = true;
    });
    m.timer.add(task, 1ms);
    std::thread runner([&] { m.advance(1ms); });
    REQUIRE(in_run.wait());
    CHECK_FALSE(task->cancel());
    CHECK_FALSE(task->is_pending());
    release.set();
    runner.join();
    CHECK(finished.load());
  }
}

TEST_CASE(
    "timer_task.hpp: cancel() is thread-safe: 8 threads cancel one pending task, exactly one "
    "gets true") {
  for (int round = 0; round < 50; ++round) {
    ManualTimer m(TimerOptions::Concurrency::thread_safe);
    auto task = purgatory::make_task<CountingTask>();
    m.timer.add(task, 5ms);
    std::atomic<int> go{0};
    std::atomic<int> wins{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&] {
        go.fetch_add(1);
        while (go.load() < 8)
          std::this_thread::yield();
        if (task->cancel()) wins.fetch_add(1);
      });
    }
    for (std::thread& t : threads)
      t.join();
    m.advance(10ms);
    CHECK(wins.load() == 1);
    CHECK(task->runs == 0);
  }
}

TEST_CASE(
    "timer_task.hpp: is_pending() is true from add() until the run starts, is cancelled, or is "
    "handed back by close()") {
  DrivenTimer<StashExecutor> s({.name = "stash"});
  bool pending_in_run = true;
  TaskRef task;
  task = purgatory::make_task([&] { pending_in_run = task->is_pending(); });
  CHECK_FALSE(task->is_pending());
  s.timer.add(task, 2ms);
  CHECK(task->is_pending());
  s.step(2ms);
  CHECK(task->is_pending());  // expired, not started
  s.executor->run_all();
  CHECK_FALSE(pending_in_run);  // the run started
  CHECK_FALSE(task->is_pending());
  s.timer.add(task, 2ms);
  CHECK(task->cancel());
  CHECK_FALSE(task->is_pending());
  s.timer.add(task, 2ms);
  const auto handed_back = s.timer.close();
  CHECK(handed_back.size() == 1);
  CHECK_FALSE(task->is_pending());
}

TEST_CASE(
    "timer_task.hpp: on_cancel() is called at the start of every cancel(), before the pending run "
    "is looked at") {
  struct Observed : TimerTask {
    std::vector<bool> pending_at_on_cancel;
    void run() override {}
    void on_cancel() noexcept override { pending_at_on_cancel.push_back(is_pending()); }
  };
  ManualTimer m;
  auto task = purgatory::make_task<Observed>();
  CHECK_FALSE(task->cancel());  // nothing pending: still called
  m.timer.add(task, 5ms);
  CHECK(task->cancel());  // called while the run was still pending
  CHECK(task->pending_at_on_cancel == std::vector<bool>{false, true});
}

TEST_CASE(
    "timer_task.hpp: run() runs on the timer's executor, never before the deadline, an exception "
    "escaping it is reported and the timer keeps running") {
  std::atomic<int> errors{0};
  std::atomic<const TimerTask*> failed{nullptr};
  DrivenTimer<PoolExecutor> m({.name = "run",
                               .on_task_error =
                                   [&](const TimerTask& t, std::exception_ptr e) {
                                     failed = &t;
                                     try {
                                       std::rethrow_exception(e);
                                     } catch (const std::runtime_error& err) {
                                       if (std::string(err.what()) == "boom") errors.fetch_add(1);
                                     }
                                   }},
                              /*threads=*/1);
  std::atomic<Nanos::rep> ran_at{-1};
  std::atomic<bool> on_caller{true};
  Signal ran;
  Signal second_ran;
  const auto caller = std::this_thread::get_id();
  auto task = purgatory::make_task([&] {
    ran_at = m.clock.now().count();
    on_caller = std::this_thread::get_id() == caller;
    ran.set();
    throw std::runtime_error("boom");
  });
  m.timer.add(task, 7ms);
  for (int i = 0; i < 6; ++i)
    m.step(1ms);
  m.step(1ms);
  REQUIRE(ran.wait());
  CHECK(ran_at.load() >= Nanos(7ms).count());
  CHECK_FALSE(on_caller.load());
  m.timer.add(purgatory::make_task([&] { second_ran.set(); }), 1ms);
  m.step(1ms);
  CHECK(second_ran.wait());  // the timer kept running
  m.executor->shutdown();
  CHECK(errors.load() == 1);
  CHECK(failed.load() == task.get());
}

TEST_CASE(
    "timer_task.hpp: a task belongs to at most one timer at a time: adding it to a second timer "
    "while pending in the first throws std::invalid_argument") {
  ManualTimer a;
  ManualTimer b;
  auto task = purgatory::make_task<CountingTask>();
  a.timer.add(task, 2ms);
  CHECK_THROWS_WITH_AS(b.timer.add(task, 1ms), doctest::Contains("another timer"),
                       std::invalid_argument);
  CHECK(b.timer.size() == 0);
  a.advance(2ms);
  CHECK(task->runs == 1);
  CHECK_NOTHROW(b.timer.add(task, 1ms));  // no longer pending in a
  b.advance(1ms);
  CHECK(task->runs == 2);
}

TEST_CASE(
    "timer_task.hpp: library memory per pending task is sizeof(TimerTask) (48 bytes on x86-64) "
    "plus bucket headers that do not grow with the number of tasks") {
#if defined(__x86_64__)
  // vtable pointer, reference count and state, two links, expiration, and one word naming the
  // bucket (which knows the rest).
  static_assert(sizeof(TimerTask) <= 48, "a pending task grew past 48 bytes");
  CHECK(sizeof(TimerTask) == 48);
#endif
  auto bytes_with = [](int tasks) {
    ManualTimer m;
    std::vector<TaskRef> held;
    for (int i = 0; i < tasks; ++i) {
      held.push_back(purgatory::make_task<CountingTask>());
      m.timer.add(held.back(), std::chrono::milliseconds(1 + i % 19));  // level 0 only
    }
    const std::size_t bytes = m.timer.wheel_memory_bytes();
    m.timer.close();
    return bytes;
  };
  CHECK(bytes_with(100) == bytes_with(20'000));
}
