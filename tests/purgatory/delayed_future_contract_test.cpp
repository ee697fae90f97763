// delayed_future.hpp: every promise of SharedFuture, Promise, DelayedFuture and
// DelayedFuturePurgatory.
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
#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

// What a DelayedFuture's response callback saw.
struct Response {
  std::atomic<int> calls{0};
  std::atomic<Outcome> outcome{Outcome::pending};
  std::thread::id thread;  // written before calls is incremented
  std::size_t futures = 0;
  std::size_t done_futures = 0;

  DelayedFuture<int>::Callback callback() {
    return [this](const std::vector<SharedFuture<int>>& fs, Outcome o) {
      futures = fs.size();
      done_futures = 0;
      for (const auto& f : fs)
        done_futures += f.is_done() ? 1 : 0;
      outcome = o;
      thread = std::this_thread::get_id();
      calls.fetch_add(1);
    };
  }
};

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
  ManualTimer manual;
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
  ManualTimer manual;
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

TEST_CASE(
    "delayed_future.hpp: the last two futures completed on two threads at once: when one thread's "
    "check holds the operation and the other's finds it busy, the operation still completes, "
    "once") {
  // Thread A (this one) completes future a; its check sees b not done. Meanwhile thread B
  // completes b, and its check finds the lock busy; A then finishes entirely before B leaves its
  // note. B must serve it itself.
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> a;
  Promise<int> b;
  Response response;
  auto op =
      purgatory.try_complete_else_watch(1s, {a.get_future(), b.get_future()}, response.callback());
  Signal b_busy;
  Signal a_done;
  std::thread b_thread;
  std::thread::id b_id;
  bool first_try = true;
  bool first_busy = true;
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedFuture::try_complete: a future not done",
                                      [&] {
                                        if (!std::exchange(first_try, false)) return;
                                        b_thread = std::thread([&] {
                                          b_id = std::this_thread::get_id();
                                          b.set_value(2);
                                        });
                                        CHECK(b_busy.wait());
                                      }},
                                     {"DelayedOperation::check: lock busy", [&] {
                                        if (!std::exchange(first_busy, false)) return;
                                        b_busy.set();
                                        CHECK(a_done.wait());
                                      }}}});
  a.set_value(1);
  a_done.set();
  b_thread.join();
  CHECK(response.calls == 1);
  CHECK(response.outcome.load() == Outcome::completed);
  CHECK(response.thread == b_id);
  CHECK(purgatory.num_delayed() == 0);
}

TEST_CASE(
    "delayed_future.hpp: thread-safe: the last two futures completed on two threads at once, "
    "with watches from two threads, complete each operation exactly once (seeded schedule)") {
  const int n = rounds(150, 30);
  std::uint64_t link_hits = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualTimer manual;
    DelayedFuturePurgatory<int> purgatory(manual.timer);
    constexpr int kOps = 4;
    std::vector<Promise<int>> left(kOps);
    std::vector<Promise<int>> right(kOps);
    std::vector<Response> responses(kOps);
    std::vector<purgatory::Ref<DelayedFuture<int>>> ops(kOps);
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 30us});
    auto watch = [&](int i) {
      const auto k = static_cast<std::size_t>(i);
      ops[k] = purgatory.try_complete_else_watch(1s, {left[k].get_future(), right[k].get_future()},
                                                 responses[k].callback());
    };
    std::thread w1([&] {
      for (int i = 0; i < kOps; i += 2)
        watch(i);
    });
    std::thread w2([&] {
      for (int i = 1; i < kOps; i += 2)
        watch(i);
    });
    std::thread a([&] {
      for (auto& p : left)
        p.set_value(1);
    });
    std::thread b([&] {
      for (auto& p : right)
        p.set_value(2);
    });
    w1.join();
    w2.join();
    a.join();
    b.join();
    for (int i = 0; i < kOps; ++i) {
      const auto& r = responses[static_cast<std::size_t>(i)];
      CHECK(r.calls == 1);
      CHECK(r.outcome.load() == Outcome::completed);
    }
    CHECK(purgatory.num_delayed() == 0);
    link_hits += schedule.hits("DelayedFuture: took the operation");
  });
  CHECK(link_hits > 0);
}

}  // namespace
}  // namespace purgatory::test
