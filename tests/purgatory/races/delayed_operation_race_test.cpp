// purgatory/delayed_operation.hpp: exactly one outcome, the lock, and the outcome listener under
// races, on the hooked libraries at their named race points.
#include "purgatory/delayed_operation.hpp"
#include "purgatory/detail/operation_access.hpp"

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "allocation_counter.hpp"
#include "contract_support.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "delayed_operation.hpp: exactly one outcome per operation, decided under its lock, so "
    "try_complete() and the callbacks never overlap (checks, force_complete, expiry and shutdown "
    "racing, every public member from any thread, seeded schedule)") {
  const int n = rounds(150, 30);
  int outcomes[4] = {0, 0, 0, 0};
  std::uint64_t decide_points = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualPurgatory<int> p({.shards = 4});
    std::vector<ProbeRef> ops;
    for (int i = 0; i < 6; ++i) {
      ops.push_back(probe(std::chrono::milliseconds(1 + i)));
      p.purgatory.try_complete_else_watch(ops.back(), {i % 3, 3 + i % 2});
    }
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.3, .max_pause = 50us});
    std::atomic<int> forced_wins{0};
    std::thread checker([&] {
      for (int i = 0; i < 6; ++i) {
        if ((seed >> i) & 1U) ops[static_cast<std::size_t>(i)]->completable = true;
        (void)p.purgatory.check_and_complete(i % 5);
        (void)ops[static_cast<std::size_t>(5 - i)]->safe_try_complete();
      }
    });
    std::thread forcer([&] {
      for (int i = 5; i >= 0; i -= 2) {
        auto& op = *ops[static_cast<std::size_t>(i)];
        if ((seed >> (8 + i)) & 1U) {
          const std::lock_guard<DelayedOperation> lock(op);  // lock() and unlock() from here
          (void)op.is_completed();
        }
        if (op.force_complete()) forced_wins.fetch_add(1);
        (void)op.was_watched();
      }
    });
    std::thread clock([&] {
      for (int i = 0; i < 4; ++i)
        p.advance(2ms);  // expiries run inline, on this thread
    });
    checker.join();
    forcer.join();
    clock.join();
    p.purgatory.shutdown();
    for (const ProbeRef& op : ops) {
      CHECK(op->outcome() != Outcome::pending);
      CHECK(op->completions == 1);
      CHECK(op->expirations == (op->outcome() == Outcome::expired ? 1 : 0));
      CHECK(op->seen_in_on_complete.load() == op->outcome());
      check_callbacks_sound(*op);
      ++outcomes[static_cast<int>(op->outcome())];
    }
    CHECK(p.purgatory.watched() == 0);
    CHECK(p.purgatory.num_delayed() == 0);
    decide_points += schedule.hits("DelayedOperation::complete_with");
  });
  MESSAGE("completed " << outcomes[1] << ", expired " << outcomes[2] << ", shut down "
                       << outcomes[3]);
  CHECK(decide_points > 0);
  CHECK(outcomes[1] > 0);
  CHECK(outcomes[2] > 0);
}

TEST_CASE(
    "delayed_operation.hpp: the expiry takes the operation's lock: a due timeout does not decide "
    "while another thread holds lock(), and decides once it is released") {
  ManualPurgatory<int> p;
  auto op = probe(10ms);
  p.purgatory.try_complete_else_watch(op, {1});
  Signal expiry_waiting;
  RaceSchedule schedule(RaceSchedule::at_each("DelayedOperation::complete_with: still pending",
                                              [&] { expiry_waiting.set(); }));
  op->lock();
  std::thread expiry([&] { p.advance(20ms); });
  REQUIRE(expiry_waiting.wait());
  std::this_thread::sleep_for(5ms);  // room for a broken expiry to decide without the lock
  CHECK(op->outcome() == Outcome::pending);
  CHECK(op->completions == 0);
  op->unlock();
  expiry.join();
  CHECK(op->outcome() == Outcome::expired);
  CHECK(op->completions == 1);
  CHECK(op->expirations == 1);
}

TEST_CASE(
    "delayed_operation.hpp: try_complete() runs with the lock held, never concurrently with "
    "itself, and only while pending (4 threads checking one operation, seeded schedule)") {
  const int n = rounds(100, 20);
  std::uint64_t busy_hits = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualPurgatory<int> p;
    auto op = probe(1h);
    op->on_try = [&] {
      std::this_thread::yield();  // a long try: others arrive while it runs
      return false;
    };
    p.purgatory.try_complete_else_watch(op, {1, 2});
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 30us});
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 20; ++i) {
          if (t == 0 && i == 10) op->completable = true;
          if (t % 2 == 0) {
            (void)p.purgatory.check_and_complete(1 + i % 2);
          } else {
            (void)op->safe_try_complete();
          }
        }
      });
    }
    for (auto& t : threads)
      t.join();
    CHECK(op->outcome() == Outcome::completed);
    CHECK(op->completions == 1);
    check_callbacks_sound(*op);
    busy_hits += schedule.hits("DelayedOperation::check: lock busy");
  });
  CHECK(busy_hits > 0);
}

TEST_CASE(
    "delayed_operation.hpp: set_outcome_listener() racing the completion: the listener is called "
    "exactly once, after the callbacks, with the outcome (seeded schedule)") {
  const int n = rounds(300, 60);
  std::uint64_t stored_hits = 0;
  std::uint64_t finish_hits = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    std::atomic<int> calls{0};
    std::atomic<Outcome> seen{Outcome::pending};
    std::atomic<bool> early{false};
    auto op = probe(1s);
    {
      RaceSchedule schedule({.seed = seed, .pause_probability = 0.7, .max_pause = 40us});
      std::thread completer([&] { CHECK(op->force_complete()); });
      detail::OperationAccess::listen(*op, std::make_unique<Listener>(calls, seen, op, early));
      completer.join();
      stored_hits += schedule.hits("set_outcome_listener: stored");
      finish_hits += schedule.hits("finish: callbacks ran");
    }
    CHECK(calls == 1);
    CHECK(seen.load() == Outcome::completed);
    CHECK_FALSE(early.load());
  });
  CHECK(stored_hits > 0);
  CHECK(finish_hits > 0);
}

}  // namespace
}  // namespace purgatory::test
