// purgatory/delayed_operation_purgatory.hpp: check_and_complete(), cancel_for_key() and the counts
// racing expiries and shutdown, on the hooked libraries at their named race points.
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
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "delayed_operation_purgatory.hpp: an operation that stops being watched while a "
    "check_and_complete() is under way (completed, expired, cancelled) is not completed by it") {
  ManualPurgatory<int> p;
  auto completed = probe(1s);
  auto expired = probe(5ms);
  auto cancelled = probe(1s);
  p.purgatory.try_complete_else_watch(completed, {1});
  p.purgatory.try_complete_else_watch(expired, {1});
  p.purgatory.try_complete_else_watch(cancelled, {1, 30});
  std::vector<OperationRef> handed_back;
  RaceSchedule schedule(RaceSchedule::at_first("check_and_complete: copied", [&] {
    CHECK(completed->force_complete());
    p.advance(5ms);
    handed_back = p.purgatory.cancel_for_key(30);
    for (const auto& op : {completed, expired, cancelled})
      op->completable = true;
  }));
  CHECK(p.purgatory.check_and_complete(1) == 0);
  CHECK(schedule.hits("check_and_complete: copied") == 1);
  CHECK(completed->completions == 1);
  CHECK(expired->outcome() == Outcome::expired);
  CHECK(expired->completions == 1);
  REQUIRE(handed_back.size() == 1);
  CHECK(cancelled->outcome() == Outcome::pending);
  CHECK(cancelled->completions == 0);
  CHECK(cancelled->force_complete());  // the caller of cancel_for_key() decides
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: cancel_for_key() leaves alone an operation whose expiry "
    "already started: the expiry keeps its course") {
  ManualPurgatory<int> p;
  auto op = probe(5ms);
  p.purgatory.try_complete_else_watch(op, {1});
  std::vector<OperationRef> handed{OperationRef()};
  RaceSchedule schedule(RaceSchedule::at_each(
      "DelayedOperation::complete_with: still pending",
      [&] { on_another_thread([&] { handed = p.purgatory.cancel_for_key(1); }); }));
  p.advance(5ms);  // the expiry runs here and pauses before the operation's lock
  CHECK(schedule.hits("complete_with: still pending") == 1);
  CHECK(handed.empty());
  CHECK(op->outcome() == Outcome::expired);
  CHECK(op->expirations == 1);
  CHECK(p.purgatory.metrics().cancelled_total == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: cancel_for_key() between the timer's claim of the run and "
    "the run itself: the operation is handed back, and the run that follows does not expire it") {
  ManualPurgatory<int> p;
  auto op = probe(5ms);
  p.purgatory.try_complete_else_watch(op, {1});
  std::vector<OperationRef> handed;
  RaceSchedule schedule(RaceSchedule::at_each("ExpiredBatch::run_all: claimed, before run", [&] {
    on_another_thread([&] { handed = p.purgatory.cancel_for_key(1); });
  }));
  p.advance(5ms);  // the timer claims the run; cancel_for_key() comes before run() is called
  CHECK(schedule.hits("claimed, before run") == 1);
  REQUIRE(handed.size() == 1);
  CHECK(op->outcome() == Outcome::pending);  // never expired: handed back, the caller's
  CHECK(op->expirations == 0);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
  CHECK(p.purgatory.metrics().expired_total == 0);
  CHECK(op->force_complete());
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: cancel_for_key() racing checks, expiries and shutdown "
    "(seeded schedule): each operation is handed back (then decided by its caller) or decided by "
    "the purgatory, never both, the totals agree") {
  const int n = rounds(150, 30);
  std::uint64_t handed_total = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualPurgatory<int> p({.shards = 2});
    std::vector<ProbeRef> ops;
    for (int i = 0; i < 6; ++i) {
      ops.push_back(probe(std::chrono::milliseconds(1 + i % 3)));
      ops.back()->completable = i % 2 == 0;
      p.purgatory.try_complete_else_watch(ops.back(), {i % 2, 2 + i % 3});
      ops.back()->completable = true;
    }
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.4, .max_pause = 40us});
    std::vector<OperationRef> handed;
    std::atomic<int> caller_wins{0};
    std::thread canceller([&] {
      for (int key : {0, 3, 1, 2, 4}) {
        try {
          for (const auto& op : p.purgatory.cancel_for_key(key)) {
            handed.push_back(op);
            if (op->force_complete()) caller_wins.fetch_add(1);
          }
        } catch (const PurgatoryShutDown&) {
        }
      }
    });
    std::thread checker([&] {
      for (int key = 0; key < 5; ++key) {
        try {
          (void)p.purgatory.check_and_complete(key);
        } catch (const PurgatoryShutDown&) {
        }
      }
    });
    std::thread clock([&] { p.advance(2ms); });
    std::this_thread::sleep_for(std::chrono::microseconds(seed % 100));
    p.purgatory.shutdown();
    canceller.join();
    checker.join();
    clock.join();
    CHECK(caller_wins == static_cast<int>(handed.size()));
    int decided_by_purgatory = 0;
    for (const auto& op : ops) {
      CHECK(op->completions == 1);
      CHECK(op->outcome() != Outcome::pending);
      const bool was_handed = std::find(handed.begin(), handed.end(), op) != handed.end();
      if (!was_handed) ++decided_by_purgatory;
    }
    const auto m = p.purgatory.metrics();
    CHECK(m.cancelled_total == handed.size());
    CHECK(m.completed_total + m.expired_total + m.shut_down_total ==
          static_cast<std::uint64_t>(decided_by_purgatory));
    handed_total += handed.size();
  });
  MESSAGE("handed back " << handed_total);
  CHECK(handed_total > 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: watched() and num_delayed() read during concurrent watches "
    "and completions are never negative (never above the pairs ever linked, seeded schedule)") {
  const int n = rounds(30, 8);
  std::uint64_t sum_pauses = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualPurgatory<int> p({.shards = 8});
    constexpr int kOps = 40;
    constexpr int kKeys = 3;
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.3, .max_pause = 20us});
    std::atomic<bool> done{false};
    std::size_t max_watched = 0;
    std::size_t max_delayed = 0;
    std::thread reader([&] {
      while (!done.load()) {
        max_watched = std::max(max_watched, p.purgatory.watched());
        max_delayed = std::max(max_delayed, p.purgatory.num_delayed());
      }
    });
    std::vector<std::thread> churn;
    for (int t = 0; t < 2; ++t) {
      churn.emplace_back([&, t] {
        for (int i = 0; i < kOps / 2; ++i) {
          auto op = probe(1h);
          const int k = t * 100 + i;
          p.purgatory.try_complete_else_watch(op, {k, k + 1000, k + 2000});
          CHECK(op->force_complete());
        }
      });
    }
    for (auto& t : churn)
      t.join();
    done = true;
    reader.join();
    // A sum read shard by shard may count pairs that never existed together (documented), but
    // never more than were ever linked, and never a negative count.
    CHECK(max_watched <= 2 * (kOps / 2) * kKeys);  // a wrapped-around negative is ~2^64
    CHECK(max_delayed <= kOps);
    CHECK(p.purgatory.watched() == 0);
    CHECK(p.purgatory.num_delayed() == 0);
    sum_pauses += schedule.hits("summed a shard");
  });
  CHECK(sum_pauses > 0);
}

}  // namespace
}  // namespace purgatory::test
