// Tests of purgatory/delayed_future.hpp: every promise of SharedFuture, Promise, DelayedFuture
// and DelayedFuturePurgatory (docs/contracts.md); races: races/delayed_future_race_test.cpp.
#include "purgatory/delayed_future.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "contract_support.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "delayed_future.hpp: SharedFuture::get() returns the value, rethrows the stored exception, "
    "and throws std::logic_error before it is done, is_done() tells") {
  Promise<int> value;
  Promise<int> error;
  const SharedFuture<int> fv = value.get_future();
  const SharedFuture<int> fe = error.get_future();
  const SharedFuture<int> copy = fv;  // copyable: the same state
  CHECK_FALSE(fv.is_done());
  CHECK_THROWS_AS((void)fv.get(), std::logic_error);
  value.set_value(42);
  error.set_exception(std::make_exception_ptr(std::out_of_range("no such offset")));
  CHECK(fv.is_done());
  CHECK(copy.is_done());
  CHECK(fv.get() == 42);
  CHECK(copy.get() == 42);
  CHECK(fe.is_done());
  CHECK_THROWS_AS((void)fe.get(), std::out_of_range);
}

TEST_CASE(
    "delayed_future.hpp: when_done() runs at once on this thread if done, else on the thread that "
    "completes it, no lock is held while it runs") {
  Promise<int> promise;
  const SharedFuture<int> future = promise.get_future();
  std::thread::id ran_on;
  int nested_value = 0;
  bool nested_ran = false;
  future.when_done([&] {
    ran_on = std::this_thread::get_id();
    nested_value = future.get();                   // the future's own lock is free
    future.when_done([&] { nested_ran = true; });  // done: runs at once
  });
  CHECK(ran_on == std::thread::id{});
  std::thread::id completer_id;
  on_another_thread([&] {
    completer_id = std::this_thread::get_id();
    promise.set_value(7);
  });
  CHECK(ran_on == completer_id);
  CHECK(nested_value == 7);
  CHECK(nested_ran);
  bool at_once = false;
  future.when_done([&] { at_once = std::this_thread::get_id() == completer_id; });
  CHECK_FALSE(at_once);  // ran here, on this thread
  std::thread::id later;
  future.when_done([&] { later = std::this_thread::get_id(); });
  CHECK(later == std::this_thread::get_id());
}

TEST_CASE(
    "delayed_future.hpp: Promise is thread-safe, completing twice throws std::logic_error: of two "
    "racing completions one wins, the callbacks run once") {
  Promise<int> twice;
  twice.set_value(1);
  CHECK_THROWS_AS(twice.set_value(2), std::logic_error);
  CHECK_THROWS_AS(twice.set_exception(std::make_exception_ptr(std::runtime_error("x"))),
                  std::logic_error);
  CHECK(twice.get_future().get() == 1);

  const int n = rounds(200, 40);
  for (int round = 0; round < n; ++round) {
    Promise<int> promise;
    std::atomic<int> callbacks{0};
    promise.get_future().when_done([&] { callbacks.fetch_add(1); });
    std::atomic<int> threw{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        try {
          promise.set_value(t);
        } catch (const std::logic_error&) {
          threw.fetch_add(1);
        }
      });
    }
    for (auto& t : threads)
      t.join();
    CHECK(threw == 1);
    CHECK(callbacks == 1);
  }
}

TEST_CASE(
    "delayed_future.hpp: a DelayedFuture completes when every future is done: the callback runs "
    "once, with the futures and Outcome::completed, on the thread that completed the last one") {
  ManualTimer manual(TimerOptions::Concurrency::thread_safe);  // futures complete on other threads
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  std::vector<Promise<int>> promises(3);
  Response response;
  auto op = purgatory.try_complete_else_watch(
      1s, {promises[0].get_future(), promises[1].get_future(), promises[2].get_future()},
      response.callback());
  CHECK(op->futures().size() == 3);
  CHECK_FALSE(op->is_completed());
  CHECK(purgatory.num_delayed() == 1);
  promises[2].set_value(2);
  promises[0].set_value(0);
  CHECK(response.calls == 0);
  std::thread::id last_id;
  on_another_thread([&] {
    last_id = std::this_thread::get_id();
    promises[1].set_value(1);
  });
  CHECK(response.calls == 1);
  CHECK(response.outcome.load() == Outcome::completed);
  CHECK(response.futures == 3);
  CHECK(response.done_futures == 3);
  CHECK(response.thread == last_id);
  CHECK(purgatory.num_delayed() == 0);
  manual.advance(2s);
  CHECK(response.calls == 1);
}

TEST_CASE(
    "delayed_future.hpp: a DelayedFuture expires after its timeout otherwise: the callback runs "
    "once with Outcome::expired on the timer's executor") {
  ManualTimer manual(TimerOptions::Concurrency::thread_safe);
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> done;
  Promise<int> never;
  Response response;
  auto op = purgatory.try_complete_else_watch(100ms, {done.get_future(), never.get_future()},
                                              response.callback());
  done.set_value(1);
  manual.advance(99ms);
  CHECK(response.calls == 0);
  std::thread::id timer_thread;
  on_another_thread([&] {
    timer_thread = std::this_thread::get_id();
    manual.advance(1ms);  // the inline executor runs the expiry here
  });
  CHECK(response.calls == 1);
  CHECK(response.outcome.load() == Outcome::expired);
  CHECK(response.done_futures == 1);
  CHECK(response.thread == timer_thread);
  never.set_value(2);  // too late: nothing runs again
  CHECK(response.calls == 1);
  CHECK(purgatory.metrics().expired_total == 1);
}

TEST_CASE(
    "delayed_future.hpp: the futures reference only a small link, never the operation: an "
    "operation whose futures never complete is still freed") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> never;  // outlives the operation, never completed
  auto sentinel = std::make_shared<int>(0);
  std::weak_ptr<int> alive = sentinel;
  {
    auto op = purgatory.try_complete_else_watch(
        10ms, {never.get_future()},
        [s = sentinel](const std::vector<SharedFuture<int>>&, Outcome) {});
    sentinel.reset();
    manual.advance(10ms);
    CHECK(op->outcome() == Outcome::expired);
  }
  CHECK(alive.expired());
  never.set_value(1);  // the link is cleared: completing the future later touches nothing freed
}

TEST_CASE(
    "delayed_future.hpp: DelayedFuturePurgatory::try_complete_else_watch() returns the operation, "
    "whether it completed at once is its is_completed()") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> a;
  Promise<int> b;
  a.set_value(1);
  b.set_exception(std::make_exception_ptr(std::runtime_error("broker down")));
  Response response;
  auto op =
      purgatory.try_complete_else_watch(1s, {a.get_future(), b.get_future()}, response.callback());
  CHECK(op->is_completed());
  CHECK(response.calls == 1);
  CHECK(response.outcome.load() == Outcome::completed);
  CHECK(purgatory.num_delayed() == 0);
  CHECK_THROWS_AS((void)op->futures()[1].get(), std::runtime_error);
  Response empty;
  auto none = purgatory.try_complete_else_watch(1s, {}, empty.callback());
  CHECK(none->is_completed());  // no futures: all (none) are done
  CHECK(empty.calls == 1);
}

TEST_CASE(
    "delayed_future.hpp: DelayedFuturePurgatory: default options name it \"delayed-future\", "
    "shutdown() gives waiting operations Outcome::shut_down") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  CHECK(purgatory.metrics().name == "delayed-future");
  Promise<int> never;
  Response response;
  auto op = purgatory.try_complete_else_watch(1s, {never.get_future()}, response.callback());
  purgatory.shutdown();
  CHECK(response.calls == 1);
  CHECK(response.outcome.load() == Outcome::shut_down);
  CHECK(purgatory.metrics().shut_down_total == 1);
  never.set_value(1);
  CHECK(response.calls == 1);

  PurgatoryOptions own;
  own.name = "own-timer";
  DelayedFuturePurgatory<int> owning(own);  // its own SystemTimer
  CHECK(owning.metrics().name == "own-timer");
}

}  // namespace
}  // namespace purgatory::test

namespace purgatory::test {
namespace {

TEST_CASE("delayed future: completes when all 3 futures are done - on the last one's thread") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  std::vector<Promise<int>> promises(3);
  std::vector<SharedFuture<int>> futures;
  for (auto& p : promises)
    futures.push_back(p.get_future());
  int sum = -1;
  Outcome seen = Outcome::pending;
  auto op = purgatory.try_complete_else_watch(
      100ms, futures, [&](const std::vector<SharedFuture<int>>& done, Outcome o) {
        seen = o;
        sum = 0;
        for (const auto& f : done)
          sum += f.get();
      });
  CHECK_FALSE(op->is_completed());
  promises[0].set_value(1);
  promises[2].set_value(3);
  CHECK_FALSE(op->is_completed());
  CHECK(purgatory.num_delayed() == 1);
  promises[1].set_value(2);
  CHECK(seen == Outcome::completed);
  CHECK(sum == 6);
  CHECK(purgatory.num_delayed() == 0);
  CHECK(manual.timer.size() == 0);
}

TEST_CASE("delayed future: expires after 100 ms if one future never completes") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> done;
  Promise<int> never;
  done.set_value(1);
  Outcome seen = Outcome::pending;
  auto op = purgatory.try_complete_else_watch(
      100ms, {done.get_future(), never.get_future()},
      [&](const std::vector<SharedFuture<int>>&, Outcome o) { seen = o; });
  manual.advance(99ms);
  CHECK(seen == Outcome::pending);
  manual.advance(1ms);
  CHECK(seen == Outcome::expired);
  never.set_value(2);  // too late: nothing happens, nothing dangles
  CHECK(op->outcome() == Outcome::expired);
}

TEST_CASE("delayed future: futures already done complete it at once and errors are delivered") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> ok;
  Promise<int> failed;
  ok.set_value(1);
  failed.set_exception(std::make_exception_ptr(std::runtime_error("no leader")));
  bool threw = false;
  auto op =
      purgatory.try_complete_else_watch(1s, {ok.get_future(), failed.get_future()},
                                        [&](const std::vector<SharedFuture<int>>& fs, Outcome) {
                                          CHECK_THROWS_AS((void)fs[1].get(), std::runtime_error);
                                          threw = true;
                                        });
  CHECK(op->is_completed());
  CHECK(threw);
  CHECK_THROWS_AS(ok.set_value(2), std::logic_error);
}

}  // namespace
}  // namespace purgatory::test
