// purgatory/delayed_operation.hpp: force_complete() and safe_try_complete() racing each other and
// the expiry, on the hooked libraries at their named race points.
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
    "delayed_operation.hpp: force_complete(): exactly one of 8 threads and the expiry wins and "
    "gets true, the winner's on_complete() has run when it returns (seeded schedule)") {
  const int n = rounds(100, 20);
  int expiry_won = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualPurgatory<int> p;
    auto op = probe(1ms);
    p.purgatory.try_complete_else_watch(op, {1});
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 30us});
    std::atomic<int> wins{0};
    std::atomic<bool> winner_saw_callback{true};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        if (op->force_complete()) {
          wins.fetch_add(1);
          if (op->completions != 1) winner_saw_callback = false;
        }
      });
    }
    threads.emplace_back([&] { p.advance(1ms); });
    for (auto& t : threads)
      t.join();
    const bool expired = op->outcome() == Outcome::expired;
    expiry_won += expired ? 1 : 0;
    CHECK(wins == (expired ? 0 : 1));
    CHECK(winner_saw_callback.load());
    CHECK(op->completions == 1);
  });
  MESSAGE("the expiry won " << expiry_won << " of " << n);
}

TEST_CASE(
    "delayed_operation.hpp: safe_try_complete(): no check is lost when the holder releases the "
    "lock after the check found it busy but before it left its note") {
  // The holder's try sees the condition false; meanwhile the condition becomes true and a second
  // check finds the lock busy; the holder then finishes entirely, and only then is the note left.
  // Nobody holds the lock any more to serve it: the second check must serve it itself.
  auto op = probe(1s);
  Signal holder_in_try;
  Signal checker_busy;
  Signal holder_done;
  op->on_try = [&] {
    if (op->tries == 1) {
      holder_in_try.set();
      CHECK(checker_busy.wait());
    }
    return false;
  };
  RaceSchedule schedule(RaceSchedule::at_first("DelayedOperation::check: lock busy", [&] {
    checker_busy.set();
    CHECK(holder_done.wait());
  }));
  std::thread holder([&] {
    CHECK_FALSE(op->safe_try_complete());
    holder_done.set();
  });
  REQUIRE(holder_in_try.wait());
  op->completable = true;
  std::thread checker([&] { (void)op->safe_try_complete(); });
  holder.join();
  checker.join();
  CHECK(schedule.hits("DelayedOperation::check: lock busy") >= 1);
  CHECK(op->is_completed());
  CHECK(op->completions == 1);
}

TEST_CASE(
    "delayed_operation.hpp: safe_try_complete(): no check is lost when it finds the lock busy "
    "after the holder last looked for notes, and leaves before the holder releases it") {
  // The holder's try sees the condition false and finds no note; in that window the condition
  // becomes true and a second check finds the lock busy twice (its note written in between) and
  // gives up. The holder's release must serve the note: its own call completes the operation.
  auto op = probe(1s);
  std::thread checker;
  RaceSchedule schedule(RaceSchedule::at_first(
      "DelayedOperation::run_try_complete_locked: no note seen, still held", [&] {
        op->completable = true;
        checker = std::thread([&] { CHECK_FALSE(op->safe_try_complete()); });
        checker.join();  // it left while the lock was still held
      }));
  CHECK(op->safe_try_complete());  // served after the release, by this call
  CHECK(schedule.hits("DelayedOperation::check: lock busy") >= 2);
  CHECK(op->is_completed());
  CHECK(op->completions == 1);
  CHECK(op->tries == 2);
}

}  // namespace
}  // namespace purgatory::test
