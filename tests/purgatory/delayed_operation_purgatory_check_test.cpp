// delayed_operation_purgatory.hpp: check_and_complete(), cancel_for_key() and the counts.
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
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

// Hashes as std::hash; while `probe` is set, calls it first (from whichever thread hashes).
struct ProbingHash {
  static inline std::function<void()> probe;
  std::size_t operator()(int key) const {
    if (probe) probe();
    return std::hash<int>{}(key);
  }
};

TEST_CASE(
    "delayed_operation_purgatory.hpp: check_and_complete() returns how many this call completed, "
    "they leave every key at once, 0 for a key nobody watches") {
  ManualPurgatory<int> p;
  auto a = probe(1s);
  auto b = probe(1s);
  auto c = probe(1s);
  p.purgatory.try_complete_else_watch(a, {1, 2});
  p.purgatory.try_complete_else_watch(b, {1, 3});
  p.purgatory.try_complete_else_watch(c, {1});
  CHECK(p.purgatory.check_and_complete(42) == 0);
  a->completable = true;
  b->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 2);
  CHECK(p.purgatory.watched() == 1);
  CHECK(p.purgatory.num_delayed() == 1);
  CHECK(p.purgatory.check_and_complete(2) == 0);
  CHECK(p.purgatory.check_and_complete(3) == 0);
  CHECK(c->outcome() == Outcome::pending);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: check_and_complete() never waits for an operation's lock: "
    "it completes the others on the key and returns while one is locked elsewhere") {
  ManualPurgatory<int> p(TimerOptions::Concurrency::thread_safe);
  auto locked = probe(1s);
  auto free_op = probe(1s);
  p.purgatory.try_complete_else_watch(locked, {1});
  p.purgatory.try_complete_else_watch(free_op, {1});
  locked->completable = true;
  free_op->completable = true;
  Signal holding;
  Signal checked;
  std::thread holder([&] {
    locked->lock();
    holding.set();
    CHECK(checked.wait(5s));
    locked->unlock();  // serves the note the check left
  });
  REQUIRE(holding.wait());
  CHECK(p.purgatory.check_and_complete(1) == 1);
  checked.set();
  holder.join();
  CHECK(free_op->outcome() == Outcome::completed);
  CHECK(locked->outcome() == Outcome::completed);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: no shard lock is held while try_complete() runs (a check "
    "or the watch's second try): other threads use the same key meanwhile") {
  PurgatoryOptions options;
  options.shards = 1;  // every key in one shard
  ManualPurgatory<int> p(TimerOptions::Concurrency::thread_safe, options);
  std::atomic<int> others_done{0};
  auto use_the_shard = [&] {
    Signal done;
    std::thread other([&] {
      auto o = probe(1s);
      p.purgatory.try_complete_else_watch(o, {1});
      (void)p.purgatory.check_and_complete(2);
      (void)p.purgatory.cancel_for_key(3);
      (void)p.purgatory.watched();
      CHECK(o->force_complete());
      done.set();
    });
    CHECK(done.wait(5s));  // fails if this thread held the shard lock
    other.join();
    others_done.fetch_add(1);
  };
  auto op = probe(1s);
  op->on_try = [&] {
    if (op->tries >= 2) use_the_shard();  // from the watch's second try on
    return false;
  };
  p.purgatory.try_complete_else_watch(op, {1});
  CHECK(p.purgatory.check_and_complete(1) == 0);
  CHECK(others_done == 2);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: the key map runs Hash under a shard lock (so Hash, KeyEqual "
    "and Key's copy constructor must not call into the purgatory): a snapshot() on another "
    "thread waits while it runs") {
  PurgatoryOptions options;
  options.shards = 1;  // every key in one shard
  ManualTimer manual;
  DelayedOperationPurgatory<int, ProbingHash> p(manual.timer, options);
  int calls = 0;
  int blocked = 0;
  std::vector<std::thread> snapshots;
  ProbingHash::probe = [&] {
    ++calls;
    auto done = std::make_shared<std::atomic<bool>>(false);
    snapshots.emplace_back([&p, done] {
      (void)p.snapshot();  // takes every shard lock in turn
      *done = true;
    });
    // Not under a shard lock, the snapshot gets through at once; under one, never while we wait.
    if (!eventually([&] { return done->load(); }, 500ms)) ++blocked;
  };
  auto op = probe(1s);
  p.try_complete_else_watch(op, {1});  // hashes to pick the shard, then in the map, under its lock
  ProbingHash::probe = nullptr;
  for (auto& t : snapshots)
    t.join();
  MESSAGE(calls << " hashes during the watch, " << blocked << " under a shard lock");
  CHECK(blocked >= 1);
  CHECK(op->force_complete());
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: cancel_for_key() stops watching every operation on the key "
    "(on all its keys), cancels its timeout, decides no outcome, returns them, counts them in "
    "cancelled_total, the purgatory never expires or shuts them down") {
  ManualPurgatory<int> p;
  auto a = probe(10ms);
  auto b = probe(10ms);
  auto other = probe(10ms);
  p.purgatory.try_complete_else_watch(a, {1, 2});
  p.purgatory.try_complete_else_watch(b, {1, 3});
  p.purgatory.try_complete_else_watch(other, {4});
  const auto handed = p.purgatory.cancel_for_key(1);
  REQUIRE(handed.size() == 2);
  CHECK(((handed[0] == a && handed[1] == b) || (handed[0] == b && handed[1] == a)));
  CHECK(p.purgatory.watched() == 1);
  CHECK(p.purgatory.num_delayed() == 1);
  CHECK(p.manual.timer.size() == 1);
  CHECK(p.purgatory.metrics().cancelled_total == 2);
  CHECK(p.purgatory.cancel_for_key(2).empty());  // already gone from its other keys
  a->completable = true;
  CHECK(p.purgatory.check_and_complete(2) == 0);
  p.advance(20ms);  // past their timeouts
  CHECK(a->outcome() == Outcome::pending);
  CHECK(b->outcome() == Outcome::pending);
  CHECK(other->outcome() == Outcome::expired);
  p.purgatory.shutdown();
  CHECK(a->outcome() == Outcome::pending);
  CHECK(b->outcome() == Outcome::pending);
  CHECK(a->completions + b->completions == 0);
  CHECK(a->force_complete());  // the caller decides
  CHECK(b->force_complete());
  CHECK(a->completions == 1);
  const auto m = p.purgatory.metrics();
  CHECK(m.completed_total == 0);  // the caller's completions are not the purgatory's
  CHECK(m.shut_down_total == 0);
  CHECK(m.expired_total == 1);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: cancel_for_key() hands back an operation whose timeout is "
    "no longer pending: it is neither decided nor expiring") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1, 2});
  CHECK(cancel_timeout(*op));
  const auto handed = p.purgatory.cancel_for_key(1);
  REQUIRE(handed.size() == 1);
  CHECK(handed[0] == op);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
  p.purgatory.shutdown();
  CHECK(op->outcome() == Outcome::pending);  // the caller's to decide
  CHECK(op->force_complete());
}

TEST_CASE("delayed_operation_purgatory.hpp: cancel_for_key() waits for each operation's lock") {
  ManualPurgatory<int> p(TimerOptions::Concurrency::thread_safe);
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  op->lock();
  std::atomic<bool> returned{false};
  std::size_t handed = 0;
  std::thread canceller([&] {
    handed = p.purgatory.cancel_for_key(1).size();
    returned = true;
  });
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(returned.load());
  CHECK(p.purgatory.watched() == 1);  // nothing changes until it has the lock
  op->unlock();
  canceller.join();
  CHECK(handed == 1);
  CHECK(p.purgatory.watched() == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: watched() and num_delayed() are exact while nothing "
    "changes") {
  ManualPurgatory<int> p({.shards = 64});
  std::vector<ProbeRef> ops;
  std::size_t pairs = 0;
  for (int i = 0; i < 200; ++i) {
    ops.push_back(probe(1h));
    std::vector<int> keys;
    for (int k = 0; k <= i % 5; ++k)
      keys.push_back(i * 7 + k * 1000);
    pairs += keys.size();
    p.purgatory.try_complete_else_watch(ops.back(), std::span<const int>(keys));
  }
  CHECK(p.purgatory.watched() == pairs);
  CHECK(p.purgatory.num_delayed() == 200);
  for (int i = 0; i < 200; i += 2) {
    pairs -= static_cast<std::size_t>(i % 5 + 1);
    CHECK(ops[static_cast<std::size_t>(i)]->force_complete());
  }
  CHECK(p.purgatory.watched() == pairs);
  CHECK(p.purgatory.num_delayed() == 100);
  const auto m = p.purgatory.metrics();
  CHECK(m.watched == pairs);
  CHECK(m.delayed == 100);
}

}  // namespace
}  // namespace purgatory::test
