// delayed_operation.hpp: DelayedOperation's memory, its timeout, force_complete(),
// safe_try_complete(), its lock, and make_operation().
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
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "delayed_operation.hpp: memory: 128 bytes holding the first key's watch, more keys one block "
    "of 8 + 32 bytes per further key from the pool, freed when unwatched (x86-64)") {
#if defined(__x86_64__)
  static_assert(sizeof(DelayedOperation) <= 128, "a waiting operation grew past two cache lines");
  CHECK(sizeof(DelayedOperation) == 128);
  // make_operation() adds only its callables: two capturing a pointer each, one empty.
  int flag = 0;
  auto condition = [&flag] { return flag != 0; };
  auto on_complete = [&flag] { ++flag; };
  using Made =
      detail::CallableOperation<decltype(condition), decltype(on_complete), detail::NoCallback>;
  static_assert(sizeof(Made) <= 128 + 16, "make_operation() adds more than its callables");
  CHECK(sizeof(Made) == 128 + 16);
#endif
  MESSAGE("sizeof(DelayedOperation) = " << sizeof(DelayedOperation));
  if (!contract::counting_allocations()) {
    MESSAGE("allocations are not counted in this build (ThreadSanitizer): per-key part unchecked");
    return;
  }
  ManualPurgatory<int> p;
  // Keys already in the purgatory: a new watcher on them adds only its own nodes.
  auto anchor = probe(1h);
  p.purgatory.try_complete_else_watch(anchor, {1, 2, 3, 4, 5, 6, 7, 8});
  auto watch_bytes = [&](std::initializer_list<int> keys, ProbeRef& op) {
    op = probe(1h);
    const auto before = contract::allocation_counts();
    p.purgatory.try_complete_else_watch(op, keys);
    return contract::allocation_counts().requested_bytes - before.requested_bytes;
  };
  ProbeRef warm;
  (void)watch_bytes({1, 2}, warm);  // the first watch may set up per-thread state
  CHECK(warm->force_complete());    // and so may the first completion
  ProbeRef one;
  ProbeRef two;
  ProbeRef eight;
  CHECK(watch_bytes({1}, one) == 0);
  const auto bytes_two = watch_bytes({1, 2}, two);
  const auto bytes_eight = watch_bytes({1, 2, 3, 4, 5, 6, 7, 8}, eight);
  const auto live_before = contract::allocation_counts().live_bytes;
  CHECK(eight->force_complete());
  const auto freed = live_before - contract::allocation_counts().live_bytes;
  const auto before_one = contract::allocation_counts();
  CHECK(one->force_complete());
  CHECK(contract::allocation_counts().requested_bytes == before_one.requested_bytes);
  if (purgatory::detail::kTaskPoolOn) {
    // The block comes from the pool (as the operations do), not from the heap.
    CHECK(bytes_two == 0);
    CHECK(bytes_eight == 0);
    CHECK(freed == 0);
  } else {
    // The pool is off (sanitizers): the block is a heap block of its exact size.
    CHECK(bytes_two == 8 + 32);
    CHECK(bytes_eight == 8 + 7 * 32);
    CHECK(freed >= static_cast<std::int64_t>(8 + 7 * 32));
  }
  CHECK(two->force_complete());
}

TEST_CASE(
    "delayed_operation.hpp: operations of at most 512 bytes come from the per-thread pool, not "
    "malloc, over-aligned ones from the aligned allocator") {
  struct alignas(64) Wide final : DelayedOperation {
    Wide() : DelayedOperation(1s) {}
    bool try_complete() override { return false; }
    void on_complete() override {}
  };
  for (int i = 0; i < 8; ++i) {
    const OperationRef wide(new Wide);
    CHECK(reinterpret_cast<std::uintptr_t>(wide.get()) % 64 == 0);
  }
  if (!contract::counting_allocations() || !purgatory::detail::kTaskPoolOn) {
    MESSAGE("allocations not counted or the pool is off (sanitizers): pooling unchecked");
    return;
  }
  // Freed blocks are reused: after a first round, creating and dropping operations takes nothing
  // from the heap, whichever thread freed them.
  std::vector<ProbeRef> ops;
  for (int i = 0; i < 1000; ++i)
    ops.push_back(probe(1s));
  std::thread([&] { ops.clear(); }).join();  // freed on another thread
  for (int i = 0; i < 1000; ++i)
    ops.push_back(probe(1s));
  ops.clear();
  const auto before = contract::allocation_counts();
  for (int i = 0; i < 1000; ++i)
    ops.push_back(probe(1s));
  ops.clear();
  CHECK(contract::allocation_counts().requested_bytes - before.requested_bytes <
        1000 * sizeof(DelayedOperation) / 10);
}

TEST_CASE(
    "delayed_operation.hpp: the timeout is measured from the moment a purgatory starts watching "
    "the operation") {
  ManualPurgatory<int> p;
  auto op = probe(100ms);
  CHECK(op->timeout() == 100ms);
  p.advance(10s);  // created long before it is watched
  p.purgatory.try_complete_else_watch(op, {1});
  p.advance(99ms);
  CHECK(op->outcome() == Outcome::pending);
  p.advance(1ms);
  CHECK(op->outcome() == Outcome::expired);
}

TEST_CASE(
    "delayed_operation.hpp: force_complete() by a holder of the lock (between lock() and unlock()) "
    "wins, and on_complete() runs when the last unlock() releases it, on that thread") {
  auto op = probe(1s);
  op->lock();
  op->lock();
  CHECK(op->force_complete());
  CHECK(op->outcome() == Outcome::completed);
  CHECK(op->completions == 0);
  op->unlock();
  CHECK(op->completions == 0);  // still held once
  op->unlock();
  CHECK(op->completions == 1);
  CHECK(op->complete_thread == std::this_thread::get_id());
  CHECK_FALSE(op->callback_with_lock.load());
  CHECK_FALSE(op->force_complete());  // decided: later calls lose
}

TEST_CASE(
    "delayed_operation.hpp: safe_try_complete() returns whether this call decided the outcome, "
    "and works on any pending operation, watched or not") {
  auto unwatched = probe(1s);
  CHECK_FALSE(unwatched->safe_try_complete());
  CHECK(unwatched->tries == 1);
  unwatched->completable = true;
  CHECK(unwatched->safe_try_complete());
  CHECK(unwatched->completions == 1);
  CHECK_FALSE(unwatched->safe_try_complete());  // decided: no further try
  CHECK(unwatched->tries == 2);

  ManualPurgatory<int> p;
  auto watched = probe(1s);
  p.purgatory.try_complete_else_watch(watched, {1});
  CHECK_FALSE(watched->safe_try_complete());
  watched->completable = true;
  CHECK(watched->safe_try_complete());
  CHECK(p.purgatory.watched() == 0);  // it left its key
}

TEST_CASE(
    "delayed_operation.hpp: safe_try_complete() does not wait for a lock another thread holds: "
    "it leaves a note, and the holder checks again before releasing (on its own thread)") {
  auto op = probe(1s);
  Signal holding;
  Signal returned;
  std::thread::id holder_id;
  std::thread holder([&] {
    holder_id = std::this_thread::get_id();
    op->lock();
    holding.set();
    CHECK(returned.wait(5s));  // fails if safe_try_complete() waited for the lock
    op->unlock();
  });
  REQUIRE(holding.wait());
  op->completable = true;
  CHECK_FALSE(op->safe_try_complete());
  CHECK(op->tries == 0);
  returned.set();
  holder.join();
  CHECK(op->tries == 1);  // the note, served by the holder's unlock()
  CHECK(op->outcome() == Outcome::completed);
  CHECK(op->try_thread == holder_id);
  CHECK(op->complete_thread == holder_id);
}

TEST_CASE(
    "delayed_operation.hpp: was_watched() is true once a purgatory accepted the operation, "
    "try_complete_else_watch() may be called once") {
  ManualPurgatory<int> p;
  ManualPurgatory<int> other;
  auto op = probe(1s);
  CHECK_FALSE(op->was_watched());
  p.purgatory.try_complete_else_watch(op, {1});
  CHECK(op->was_watched());
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, {2}), OperationAlreadyWatched);
  CHECK_THROWS_AS(other.purgatory.try_complete_else_watch(op, {2}), OperationAlreadyWatched);
  CHECK(op->force_complete());
  CHECK(op->was_watched());  // stays true after its outcome
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, {2}), OperationAlreadyWatched);

  auto refused = probe(1s);
  other.purgatory.shutdown();
  CHECK_THROWS_AS(other.purgatory.try_complete_else_watch(refused, {1}), PurgatoryShutDown);
  CHECK_FALSE(refused->was_watched());
}

TEST_CASE(
    "delayed_operation.hpp: lock(): on the last unlock() a completion decided meanwhile runs its "
    "callbacks on this thread, and a check skipped because the lock was held is retried") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  const int tries_before = op->tries;
  op->lock();
  CHECK(op->lock_held_by_current_thread());
  std::size_t completed_by_check = 99;
  // From another thread: the check returns although the lock is held.
  on_another_thread([&] { completed_by_check = p.purgatory.check_and_complete(1); });
  CHECK(completed_by_check == 0);
  CHECK(op->tries == tries_before);
  op->completable = true;  // state try_complete() reads, changed under the lock
  op->unlock();
  CHECK(op->tries == tries_before + 1);  // the skipped check, retried by unlock()
  CHECK(op->outcome() == Outcome::completed);
  CHECK(op->complete_thread == std::this_thread::get_id());
}

TEST_CASE(
    "delayed_operation.hpp: try_lock() fails while another thread holds the lock, succeeds for "
    "the holder, lock_held_by_current_thread() is true only for the holder") {
  auto op = probe(1s);
  CHECK_FALSE(op->lock_held_by_current_thread());
  CHECK(op->try_lock());
  CHECK(op->try_lock());  // re-entrant
  CHECK(op->lock_held_by_current_thread());
  bool other_got = true;
  bool other_sees_held = true;
  on_another_thread([&] {
    other_got = op->try_lock();
    other_sees_held = op->lock_held_by_current_thread();
  });
  CHECK_FALSE(other_got);
  CHECK_FALSE(other_sees_held);
  op->unlock();
  op->unlock();
  CHECK_FALSE(op->lock_held_by_current_thread());
  on_another_thread([&] {
    other_got = op->try_lock();
    if (other_got) op->unlock();
  });
  CHECK(other_got);
}

TEST_CASE(
    "delayed_operation.hpp: on_complete() runs exactly once whoever completes and outcome() tells "
    "how, on_expiration() runs once, after on_complete(), only when the timeout won") {
  ManualPurgatory<int> p;
  auto by_check = probe(1s);
  auto by_force = probe(1s);
  auto by_timeout = probe(10ms);
  auto by_shutdown = probe(1s);
  p.purgatory.try_complete_else_watch(by_check, {1});
  p.purgatory.try_complete_else_watch(by_force, {2});
  p.purgatory.try_complete_else_watch(by_timeout, {3});
  p.purgatory.try_complete_else_watch(by_shutdown, {4});
  by_check->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  CHECK(by_force->force_complete());
  p.advance(10ms);
  p.purgatory.shutdown();
  CHECK(by_check->seen_in_on_complete.load() == Outcome::completed);
  CHECK(by_force->seen_in_on_complete.load() == Outcome::completed);
  CHECK(by_timeout->seen_in_on_complete.load() == Outcome::expired);
  CHECK(by_shutdown->seen_in_on_complete.load() == Outcome::shut_down);
  for (const auto& op : {by_check, by_force, by_timeout, by_shutdown}) {
    CHECK(op->completions == 1);
    CHECK(op->expirations == (op == by_timeout ? 1 : 0));
    check_callbacks_sound(*op);
  }
}

template <class C, class F, class E = detail::NoCallback>
concept MakesOperation = requires(C c, F f, E e) {
  make_operation(1s, c, f, e);
};

TEST_CASE(
    "delayed_operation.hpp: make_operation(timeout, condition, on_complete[, on_expiration]): "
    "condition() -> bool, on_complete() or on_complete(Outcome), on_expiration()") {
  ManualPurgatory<int> p;
  bool ready = false;
  int plain_completions = 0;
  auto plain = make_operation(
      1s, [&] { return ready; }, [&] { ++plain_completions; });
  Outcome seen = Outcome::pending;
  int expirations = 0;
  auto with_outcome = make_operation(
      5ms, [] { return false; }, [&](Outcome o) { seen = o; }, [&] { ++expirations; });
  CHECK(plain->timeout() == 1s);
  p.purgatory.try_complete_else_watch(plain, {1});
  p.purgatory.try_complete_else_watch(with_outcome, {2});
  ready = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  CHECK(plain_completions == 1);
  p.advance(5ms);
  CHECK(seen == Outcome::expired);
  CHECK(expirations == 1);
  // The requirements are checked at compile time.
  auto cond = [] { return true; };
  auto done = [] {};
  static_assert(MakesOperation<decltype(cond), decltype(done)>);
  static_assert(MakesOperation<decltype(cond), void (*)(Outcome)>);
  static_assert(!MakesOperation<int, decltype(done)>);
  static_assert(!MakesOperation<decltype(cond), int>);
  static_assert(!MakesOperation<decltype(cond), decltype(done), int>);
  static_assert(!MakesOperation<decltype(cond), void (*)(int, int)>);
}

}  // namespace
}  // namespace purgatory::test
