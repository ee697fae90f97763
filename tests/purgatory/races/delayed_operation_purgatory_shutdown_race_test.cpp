// purgatory/delayed_operation_purgatory.hpp: shutdown() racing completions, expiries and checks,
// and thread safety, on the hooked libraries at their named race points.
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/detail/operation_access.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "allocation_counter.hpp"
#include "contract_support.hpp"
#include "purgatory/timer/detail/task_pool.hpp"
#include "purgatory/timer/external_driver.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "race_schedule.hpp"
#include "seeded_rounds.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown(): an operation already being completed by a "
    "check keeps Outcome::completed") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  Signal in_try;
  Signal shutdown_found_it;
  op->on_try = [&] {
    if (op->tries < 3) return false;  // the watch's tries
    in_try.set();
    CHECK(shutdown_found_it.wait());
    return true;
  };
  p.purgatory.try_complete_else_watch(op, {1});
  RaceSchedule schedule(RaceSchedule::at_each("DelayedOperationPurgatory::shutdown: found",
                                              [&] { shutdown_found_it.set(); }));
  std::thread checker([&] { CHECK(p.purgatory.check_and_complete(1) == 1); });
  REQUIRE(in_try.wait());
  p.purgatory.shutdown();
  checker.join();
  CHECK(op->outcome() == Outcome::completed);
  CHECK(op->completions == 1);
  CHECK(p.purgatory.metrics().shut_down_total == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown(): an operation whose expiry already started (the "
    "timer's run) keeps Outcome::expired, and shutdown() returns after its callbacks ran") {
  ManualPurgatory<int> p;
  auto op = probe(5ms);
  p.purgatory.try_complete_else_watch(op, {1});
  Signal expiry_started;
  Signal shutdown_waiting;
  bool first = true;
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedOperation::complete_with: still pending",
                                      [&] {
                                        if (!std::exchange(first, false)) return;
                                        expiry_started.set();
                                        // Let shutdown() reach the operation first.
                                        (void)shutdown_waiting.wait(200ms);
                                      }},
                                     {"DelayedOperationPurgatory::shutdown: found",
                                      [&] { shutdown_waiting.set(); }}}});
  std::thread expiry([&] { p.advance(5ms); });
  REQUIRE(expiry_started.wait());
  p.purgatory.shutdown();
  CHECK(op->callbacks_done.load());  // on_complete() and on_expiration() ran before it returned
  expiry.join();
  CHECK(schedule.hits("DelayedOperationPurgatory::shutdown: found") >= 1);
  CHECK(op->outcome() == Outcome::expired);
  CHECK(op->completions == 1);
  CHECK(op->expirations == 1);
  CHECK(p.purgatory.metrics().expired_total == 1);
  CHECK(p.purgatory.metrics().shut_down_total == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown() returns after the callbacks and the outcome "
    "listener of every operation that was waiting when it began have run, wherever they run") {
  ManualPurgatory<int> p;
  auto slow_callback = probe(1s);
  auto slow_listener = probe(1s);
  p.purgatory.try_complete_else_watch(slow_callback, {1});
  p.purgatory.try_complete_else_watch(slow_listener, {2});
  Signal shutdown_waiting;
  std::atomic<bool> callback_done{false};
  std::atomic<bool> listener_done{false};
  slow_callback->on_done = [&] {
    CHECK(shutdown_waiting.wait());
    std::this_thread::sleep_for(5ms);  // a shutdown() that does not wait returns meanwhile
    callback_done = true;
  };
  class SlowListener final : public detail::OutcomeListener {
   public:
    SlowListener(Signal& waiting, std::atomic<bool>& done) : waiting_(waiting), done_(done) {}
    void on_outcome(Outcome) noexcept override {
      CHECK(waiting_.wait());
      std::this_thread::sleep_for(5ms);
      done_ = true;
    }

   private:
    Signal& waiting_;
    std::atomic<bool>& done_;
  };
  detail::OperationAccess::listen(*slow_listener,
                                  std::make_unique<SlowListener>(shutdown_waiting, listener_done));
  RaceSchedule schedule(RaceSchedule::at_each("DelayedOperationPurgatory::shutdown: completed all",
                                              [&] { shutdown_waiting.set(); }));
  slow_callback->completable = true;
  std::thread checker([&] { (void)p.purgatory.check_and_complete(1); });
  std::thread forcer([&] { (void)slow_listener->force_complete(); });
  // Both are decided (their callbacks pending on the other threads) before shutdown() begins.
  REQUIRE(
      eventually([&] { return slow_callback->is_completed() && slow_listener->is_completed(); }));
  p.purgatory.shutdown();
  CHECK(callback_done.load());
  CHECK(listener_done.load());
  checker.join();
  forcer.join();
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown() returns after the error handler has reported an "
    "exception that try_complete() of a waiting operation threw on another thread") {
  std::atomic<int> reports{0};
  PurgatoryOptions options;
  options.on_callback_error = [&](const DelayedOperation&, std::exception_ptr, std::string_view) {
    std::this_thread::sleep_for(20ms);  // a shutdown() that does not wait for it returns meanwhile
    reports.fetch_add(1);
  };
  ManualPurgatory<int> p(options);
  std::atomic<bool> fail{false};
  auto op = make_operation(
      1s,
      [&]() -> bool {
        if (fail.load()) throw std::runtime_error("condition broke");
        return false;
      },
      [] {});
  p.purgatory.try_complete_else_watch(op, {1});
  fail = true;
  Signal released;
  Signal shutdown_waiting;
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedOperation::report_held_errors: lock released",
                                      [&] {
                                        released.set();
                                        (void)shutdown_waiting.wait(200ms);
                                      }},
                                     {"DelayedOperationPurgatory::shutdown: completed all",
                                      [&] { shutdown_waiting.set(); }}}});
  std::thread checker([&] { CHECK(p.purgatory.check_and_complete(1) == 0); });
  REQUIRE(released.wait());  // the check released the lock; its report is under way
  p.purgatory.shutdown();    // the operation is free to decide: shut_down
  CHECK(reports.load() == 1);
  checker.join();
  CHECK(schedule.hits("shutdown: completed all") == 1);
  CHECK(op->outcome() == Outcome::shut_down);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown() racing checks, force_complete and expiries "
    "(seeded schedule): one outcome each, and every callback has run when it returns") {
  const int n = rounds(150, 30);
  int shut = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualPurgatory<int> p({.shards = 4});
    std::vector<ProbeRef> ops;
    for (int i = 0; i < 8; ++i) {
      ops.push_back(probe(std::chrono::milliseconds(1 + i % 4)));
      ops.back()->on_done = [] { std::this_thread::yield(); };
      p.purgatory.try_complete_else_watch(ops.back(), {i % 4, 4 + i % 3});
      ops.back()->completable = (i % 3) == 0;
    }
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.4, .max_pause = 40us});
    std::thread checker([&] {
      for (int key = 0; key < 7; ++key) {
        try {
          (void)p.purgatory.check_and_complete(key);
        } catch (const PurgatoryShutDown&) {
        }
      }
    });
    std::thread forcer([&] {
      for (std::size_t i = 1; i < ops.size(); i += 3)
        (void)ops[i]->force_complete();
    });
    std::thread clock([&] { p.advance(3ms); });
    std::this_thread::sleep_for(std::chrono::microseconds(seed % 150));
    p.purgatory.shutdown();
    for (const auto& op : ops) {
      // Everything that was waiting when shutdown() began has finished its callbacks.
      if (op->outcome() != Outcome::pending) CHECK(op->callbacks_done.load());
      CHECK(op->outcome() != Outcome::pending);
    }
    checker.join();
    forcer.join();
    clock.join();
    for (const auto& op : ops) {
      CHECK(op->completions == 1);
      shut += op->outcome() == Outcome::shut_down ? 1 : 0;
    }
  });
  MESSAGE("shut down " << shut << " of " << n * 8);
  CHECK(shut > 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: thread-safe: every member from any thread, including from "
    "callbacks, while shutdown() runs, one outcome each, none for a refused watch, and the totals "
    "agree with the outcomes (seeded schedule)") {
  const int n = rounds(60, 12);
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualPurgatory<int> p({.shards = 4});
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.3, .max_pause = 20us});
    std::mutex mu;
    std::vector<ProbeRef> accepted;    // guarded by mu
    std::vector<ProbeRef> refused;     // guarded by mu
    std::vector<OperationRef> handed;  // guarded by mu
    auto add = [&](int key) {
      auto op = probe(std::chrono::milliseconds(1 + key % 3));
      op->completable = key % 2 == 0;
      op->on_done = [&p, key] {
        (void)p.purgatory.watched();
        try {
          (void)p.purgatory.check_and_complete(key + 1);
        } catch (const PurgatoryShutDown&) {
        }
      };
      try {
        (void)p.purgatory.try_complete_else_watch(op, {key, key + 1});
      } catch (const PurgatoryShutDown&) {
        const std::lock_guard<std::mutex> lock(mu);
        refused.push_back(op);
        return;
      }
      const std::lock_guard<std::mutex> lock(mu);
      accepted.push_back(op);
    };
    auto force_some = [&](int i) {
      ProbeRef op;
      {
        const std::lock_guard<std::mutex> lock(mu);
        if (accepted.empty()) return;
        op = accepted[static_cast<std::size_t>(i) % accepted.size()];
      }
      (void)op->force_complete();
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 12; ++i) {
          const int key = (t * 5 + i) % 8;
          try {
            switch ((i + t) % 5) {
              case 0:
                add(key);
                break;
              case 1:
                (void)p.purgatory.check_and_complete(key);
                break;
              case 2: {
                auto back = p.purgatory.cancel_for_key(key);
                for (const auto& op : back)
                  (void)op->force_complete();  // the caller decides (another thread may too)
                const std::lock_guard<std::mutex> lock(mu);
                handed.insert(handed.end(), back.begin(), back.end());
                break;
              }
              case 3:
                force_some(i + t);
                break;
              default:
                (void)p.purgatory.metrics();
                add(key + 1);
            }
          } catch (const PurgatoryShutDown&) {
          }
        }
      });
    }
    threads.emplace_back([&] { p.advance(3ms); });
    std::this_thread::sleep_for(std::chrono::microseconds(seed % 300));
    p.purgatory.shutdown();
    for (auto& t : threads)
      t.join();
    std::uint64_t by_purgatory[4] = {0, 0, 0, 0};
    for (const auto& op : accepted) {
      CHECK(op->completions == 1);
      CHECK(op->outcome() != Outcome::pending);
      CHECK_FALSE(op->concurrent_try.load());
      CHECK_FALSE(op->try_after_outcome.load());
      CHECK_FALSE(op->callback_with_lock.load());
      const bool was_handed = std::find(handed.begin(), handed.end(), op) != handed.end();
      if (was_handed) {
        CHECK(op->outcome() == Outcome::completed);  // by a caller: never expired or shut down
      } else {
        ++by_purgatory[static_cast<int>(op->outcome())];
      }
    }
    for (const auto& op : refused) {
      CHECK(op->outcome() == Outcome::pending);
      CHECK(op->completions == 0);
    }
    const auto m = p.purgatory.metrics();
    CHECK(m.cancelled_total == handed.size());
    CHECK(m.completed_total == by_purgatory[1]);
    CHECK(m.expired_total == by_purgatory[2]);
    CHECK(m.shut_down_total == by_purgatory[3]);
    CHECK(m.watched == 0);
    CHECK(m.delayed == 0);
  });
}

}  // namespace
}  // namespace purgatory::test
