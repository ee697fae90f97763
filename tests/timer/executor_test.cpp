// Contract tests for purgatory/timer/executor.hpp: one test per promise (docs/contracts.md).
#include "purgatory/timer/executor.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "threads.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

static_assert(!std::is_copy_constructible_v<ExpiredBatch>);
static_assert(!std::is_copy_assignable_v<ExpiredBatch>);
static_assert(std::is_nothrow_move_constructible_v<ExpiredBatch>);
static_assert(noexcept(std::declval<ExpiredBatch&>().run_all()));

TEST_CASE(
    "executor.hpp: expired tasks come to the executor in batches of at most kMaxBatch, all due, "
    "one execute() call per batch") {
  auto stash = std::make_shared<StashExecutor>();
  Timed t(stash);
  for (int i = 0; i < 10; ++i)
    t.timer.add(purgatory::make_task<CountingTask>(), 5ms);
  t.timer.add(purgatory::make_task<CountingTask>(), 1h);
  t.advance(5ms);
  CHECK(stash->sizes() == std::vector<std::size_t>{10});
  for (int i = 0; i < 600; ++i)
    t.timer.add(purgatory::make_task<CountingTask>(), 5ms);
  t.advance(5ms);
  const auto sizes = stash->sizes();
  REQUIRE(sizes.size() == 4);  // 10, then 600 in 3 batches
  std::size_t total = 0;
  for (std::size_t i = 1; i < sizes.size(); ++i) {
    CHECK(sizes[i] <= SystemTimer::kMaxBatch);
    total += sizes[i];
  }
  CHECK(total == 600);
  stash->run_all();
  t.timer.close();
}

TEST_CASE(
    "executor.hpp: run_all() skips a task whose run was withdrawn meanwhile, by cancel() or by a "
    "re-add to a new deadline") {
  auto stash = std::make_shared<StashExecutor>();
  Timed t(stash);
  auto kept = purgatory::make_task<CountingTask>();
  auto cancelled = purgatory::make_task<CountingTask>();
  auto moved = purgatory::make_task<CountingTask>();
  for (const auto& task : {kept, cancelled, moved})
    t.timer.add(task, 1ms);
  t.advance(1ms);
  REQUIRE(stash->held() == 1);
  CHECK(cancelled->cancel());
  t.timer.add(moved, 5ms);
  stash->run_all();
  CHECK(kept->runs == 1);
  CHECK(cancelled->runs == 0);
  CHECK(moved->runs == 0);
  t.advance(5ms);
  stash->run_all();
  CHECK(moved->runs == 1);  // once, at its new deadline
}

TEST_CASE(
    "executor.hpp: destroying a batch without running it drops its runs: the tasks do not run, "
    "the batch's references are released, and a dropped task added again runs once") {
  auto stash = std::make_shared<StashExecutor>();
  Timed t(stash);
  std::atomic<bool> destroyed{false};
  auto kept = purgatory::make_task<CountingTask>();
  t.timer.add(kept, 1ms);
  t.timer.add(
      purgatory::make_task<Tracked>(destroyed, [] { FAIL("a dropped run must not happen"); }),
      1ms);  // fire and forget
  t.advance(1ms);
  REQUIRE(stash->held() == 1);
  CHECK(kept->use_count() == 2);
  stash->drop_all();
  CHECK(destroyed.load());
  CHECK(kept->use_count() == 1);
  CHECK(kept->runs == 0);
  CHECK(kept->is_pending());
  t.timer.add(kept, 5ms);
  t.advance(4ms);
  stash->run_all();
  CHECK(kept->runs == 0);
  t.advance(1ms);
  stash->run_all();
  CHECK(kept->runs == 1);
  CHECK_FALSE(kept->is_pending());
}

TEST_CASE(
    "executor.hpp: run_all() runs the tasks on the calling thread, then empties the batch, an "
    "executor may move the batch out and run it later on another thread") {
  struct Later final : purgatory::Executor {
    std::vector<ExpiredBatch> held;
    void execute(ExpiredBatch& batch) override { held.push_back(std::move(batch)); }
  };
  auto later = std::make_shared<Later>();
  Timed t(later);
  std::vector<std::thread::id> ran_on;
  for (int i = 0; i < 3; ++i)
    t.timer.add(purgatory::make_task([&] { ran_on.push_back(std::this_thread::get_id()); }), 1ms);
  t.advance(1ms);
  REQUIRE(later->held.size() == 1);
  CHECK(later->held[0].size() == 3);
  std::thread::id runner_id;
  std::thread runner([&] {
    runner_id = std::this_thread::get_id();
    later->held[0].run_all();
  });
  runner.join();
  CHECK(ran_on == std::vector<std::thread::id>(3, runner_id));
  CHECK(later->held[0].empty());
  CHECK(later->held[0].size() == 0);
}

TEST_CASE(
    "executor.hpp: run_all(): a task whose deadline falls in an earlier tick runs before one of a "
    "later tick, across levels and cascades (1000 random deadlines, every batch)") {
  struct Numbered final : purgatory::Executor {
    int batch = 0;
    void execute(ExpiredBatch& b) override {
      ++batch;
      b.run_all();
    }
  };
  auto numbered = std::make_shared<Numbered>();
  ManualClock clock;
  SystemTimer timer(TimerOptions{.tick = 1ms,
                                 .wheel_size = 8,  // many levels, many cascades
                                 .clock = &clock,
                                 .executor = numbered,
                                 .driver = TimerOptions::Driver::external});
  ExternalDriver driver(timer);
  std::mt19937_64 rng(17);
  std::vector<std::pair<int, std::int64_t>> runs;  // (batch, tick of the deadline)
  for (int i = 0; i < 1000; ++i) {
    const Nanos delay{static_cast<std::int64_t>(rng() % 3'000'000'000ULL) + 1};
    const std::int64_t tick = (delay.count() + 999'999) / 1'000'000;
    timer.add(purgatory::make_task([&, tick] { runs.emplace_back(numbered->batch, tick); }), delay);
  }
  clock.advance(3s);
  driver.advance_clock();  // everything due in one pass, in several batches
  REQUIRE(runs.size() == 1000);
  CHECK(numbered->batch >= 4);
  for (std::size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].first == runs[i - 1].first) CHECK(runs[i - 1].second <= runs[i].second);
  }
}

TEST_CASE(
    "executor.hpp: run_all() never throws: an exception goes to the TaskErrorHandler with its "
    "task, one thrown by the handler itself is dropped and the batch goes on") {
  std::vector<std::string> reported;
  std::vector<const TimerTask*> reported_tasks;
  Timed t(std::make_shared<InlineExecutor>(), [&](const TimerTask& task, std::exception_ptr e) {
    reported_tasks.push_back(&task);
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& err) {
      reported.emplace_back(err.what());
    }
    if (reported.size() == 2) throw std::logic_error("the handler itself fails");
  });
  std::vector<TaskRef> throwing;
  for (int i = 0; i < 3; ++i) {
    throwing.push_back(
        purgatory::make_task([i] { throw std::runtime_error("task " + std::to_string(i)); }));
    t.timer.add(throwing.back(), 1ms);
  }
  auto last = purgatory::make_task<CountingTask>();
  t.timer.add(last, 1ms);
  CHECK_NOTHROW(t.advance(1ms));
  CHECK(reported.size() == 3);
  CHECK(reported_tasks.size() == 3);
  for (const auto& task : throwing) {
    CHECK(std::count(reported_tasks.begin(), reported_tasks.end(), task.get()) == 1);
  }
  CHECK(last->runs == 1);
}

TEST_CASE(
    "executor.hpp: an execute() that throws before taking the batch: the TaskErrorHandler gets the "
    "exception with the batch's first task and the batch runs at once on the calling thread, one "
    "that throws after moving the batch out: printed to stderr naming the timer, the batch is "
    "the executor's") {
  struct Failing final : Executor {
    bool take = false;
    std::vector<ExpiredBatch> taken;
    void execute(ExpiredBatch& batch) override {
      if (take) taken.push_back(std::move(batch));
      throw std::runtime_error("queue full");
    }
  };
  auto failing = std::make_shared<Failing>();
  std::vector<const TimerTask*> reported;
  Timed t(failing, [&](const TimerTask& task, std::exception_ptr e) {
    CHECK_THROWS_WITH_AS(std::rethrow_exception(e), "queue full", std::runtime_error);
    reported.push_back(&task);
  });
  auto first = purgatory::make_task<CountingTask>();
  auto second = purgatory::make_task<CountingTask>();
  t.timer.add(first, 1ms);
  t.timer.add(second, 2ms);
  t.advance(2ms);  // one batch of two, left with the timer
  CHECK(reported == std::vector<const TimerTask*>{first.get()});
  CHECK(first->runs == 1);
  CHECK(second->runs == 1);

  failing->take = true;
  auto later = purgatory::make_task<CountingTask>();
  t.timer.add(later, 1ms);
  StderrCapture err;
  t.advance(1ms);
  const std::string printed = err.text();
  CHECK(printed.find("timer 'exec': Executor::execute() threw: queue full") != std::string::npos);
  CHECK(reported.size() == 1);  // not reported again
  CHECK(later->runs == 0);      // the executor's now, not run by the timer
  REQUIRE(failing->taken.size() == 1);
  failing->taken[0].run_all();
  CHECK(later->runs == 1);
}

TEST_CASE(
    "executor.hpp: ExpiredBatch's move assignment takes the other batch's runs and drops its own, "
    "as destroying it would: the dropped task does not run and stays pending until cancel() "
    "(true), and the batch no longer counts as in flight (drain() returns)") {
  struct Keep final : Executor {
    std::vector<ExpiredBatch> held;
    void execute(ExpiredBatch& batch) override { held.push_back(std::move(batch)); }
  };
  auto keep = std::make_shared<Keep>();
  Timed t(keep);
  auto dropped = purgatory::make_task<CountingTask>();
  auto taken = purgatory::make_task<CountingTask>();
  t.timer.add(dropped, 1ms);
  t.advance(1ms);
  t.timer.add(taken, 1ms);
  t.advance(1ms);
  REQUIRE(keep->held.size() == 2);
  keep->held[0] = std::move(keep->held[1]);
  CHECK(keep->held[0].size() == 1);
  CHECK(keep->held[1].empty());      // moved from: empty, how the timer tells a batch was taken
  CHECK(dropped->use_count() == 1);  // the batch's reference went with its run
  keep->held[0].run_all();
  CHECK(taken->runs == 1);
  CHECK(dropped->runs == 0);
  CHECK(dropped->is_pending());  // neither run nor cancelled
  CHECK(dropped->cancel());
  CHECK_FALSE(dropped->is_pending());
  CHECK_FALSE(dropped->cancel());
  const Watchdog watchdog("drain() after every batch ran or was dropped");
  CHECK(t.timer.drain().empty());  // nothing pending, nothing in flight: returns at once
}

TEST_CASE("executor.hpp: close() calls shutdown() only on the executor the timer created itself") {
  auto stash = std::make_shared<StashExecutor>();
  {
    Timed t(stash);
    t.timer.close();
  }
  CHECK(stash->shutdowns() == 0);
}

TEST_CASE("executor.hpp: InlineExecutor runs batches on the thread that advances the clock") {
  Timed t(std::make_shared<InlineExecutor>(), {}, TimerOptions::Concurrency::thread_safe);
  std::thread::id ran_on;
  t.timer.add(purgatory::make_task([&] { ran_on = std::this_thread::get_id(); }), 1ms);
  std::thread::id advancer;
  std::thread other([&] {
    advancer = std::this_thread::get_id();
    t.advance(1ms);
  });
  other.join();
  CHECK(ran_on == advancer);
}

TEST_CASE(
    "executor.hpp: ThreadExecutor: one worker thread, named as given (15 characters kept), runs "
    "batches in the order given, shutdown() runs what is queued, then joins, idempotent, batches "
    "given after it run on the caller's thread") {
  auto worker = std::make_shared<ThreadExecutor>("abcdefghijklmnopqrstu");
  Timed t(worker);
  Signal in_first;
  Signal release;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::string> names;
  auto record = [&](int i) {
    const std::lock_guard<std::mutex> lock(mu);
    order.push_back(i);
    names.push_back(thread_name());
  };
  t.timer.add(purgatory::make_task([&] {
                in_first.set();
                CHECK(release.wait());
                record(0);
              }),
              1ms);
  for (int i = 1; i <= 5; ++i)
    t.timer.add(purgatory::make_task([&, i] { record(i); }), std::chrono::milliseconds(1 + i));
  t.advance(1ms);
  REQUIRE(in_first.wait());
  for (int i = 1; i <= 5; ++i)
    t.advance(1ms);  // five more batches queue behind the first
  std::atomic<bool> shut{false};
  std::thread stopper([&] {
    worker->shutdown();
    shut = true;
  });
  release.set();
  stopper.join();
  {
    const std::lock_guard<std::mutex> lock(mu);
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5});  // all ran before shutdown() returned
    CHECK(names == std::vector<std::string>(6, "abcdefghijklmno"));
  }
  CHECK_NOTHROW(worker->shutdown());  // idempotent
  std::thread::id ran_on;
  t.timer.add(purgatory::make_task([&] { ran_on = std::this_thread::get_id(); }), 1ms);
  t.advance(1ms);
  CHECK(ran_on == std::this_thread::get_id());
}
