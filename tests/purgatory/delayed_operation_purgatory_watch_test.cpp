// delayed_operation_purgatory.hpp: every promise of DelayedOperationPurgatory.
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

// Hashing key 666 throws: a refused watch after other keys were linked.
struct ThrowingHash {
  std::size_t operator()(int key) const {
    if (key == 666) throw std::runtime_error("cannot hash 666");
    return std::hash<int>{}(key);
  }
};

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: a completed operation leaves every key's list the moment it "
    "completes, and a key whose list empties is erased: memory follows what is waiting now") {
  ManualPurgatory<int> p({.shards = 1});
  const int n = contract::kSanitized ? 5000 : 40000;
  std::vector<ProbeRef> ops;
  ops.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    ops.push_back(probe(1h));
  // Memory held: the heap's (the key map's bucket arrays) and the pool's (its key entries).
  const auto held = [] {
    return contract::allocation_counts().live_bytes +
           static_cast<std::int64_t>(purgatory::detail::pool_mapped_bytes());
  };
  const auto baseline_heap = contract::allocation_counts().live_bytes;
  const auto baseline = held();
  for (int i = 0; i < n; ++i) {
    p.purgatory.try_complete_else_watch(ops[static_cast<std::size_t>(i)], {-1, -2, i});
  }
  const auto waiting = held() - baseline;
  CHECK(p.purgatory.watched() == static_cast<std::size_t>(3 * n));
  for (auto& op : ops)
    op->completable = true;
  CHECK(p.purgatory.check_and_complete(-1) == static_cast<std::size_t>(n));
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.purgatory.check_and_complete(-2) == 0);  // nothing lingers on the other keys
  const int tries_after = ops[0]->tries;
  CHECK(p.purgatory.check_and_complete(0) == 0);
  CHECK(ops[0]->tries == tries_after);  // not even copied: its list is gone
  CHECK(p.purgatory.snapshot().keys_total == 0);
  const auto after_heap = contract::allocation_counts().live_bytes - baseline_heap;
  MESSAGE(n << " operations on 3 keys: " << waiting << " bytes while waiting, " << after_heap
            << " of heap after they completed");
  if (contract::counting_allocations()) {
    // The watch nodes live in the operations (3 keys <= kInlineKeys); what the purgatory holds is
    // a key entry per distinct key, one per operation here.
    CHECK(waiting > static_cast<std::int64_t>(n) * 32);
    CHECK(after_heap < 64 * 1024);  // the key map gave its memory back
  }
  // With the pool off (sanitizer builds) the entries are heap blocks too, so there `after_heap`
  // also shows that they were freed; the pool's own tests show that it gives memory back.
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: a key erased when its list empties comes back as a new "
    "entry: keys watched, emptied and watched again, keys sharing a lookup slot included, each "
    "list exactly their own operations") {
  // One shard, and keys 4096 apart: their hashes agree in the low bits, so they share the slot of
  // the shard's lookup in front of its key map, and each erase must leave that slot pointing at
  // no freed entry.
  ManualPurgatory<int> p({.shards = 1});
  constexpr std::array<int, 3> kKeys = {0, 4096, 8192};
  std::array<std::vector<ProbeRef>, kKeys.size()> waiting;  // per key, watched now
  std::uint64_t state = 12345;
  const auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::size_t>(state >> 33);
  };
  for (int round = 0; round < 2000; ++round) {
    const std::size_t k = next() % kKeys.size();
    auto& ops = waiting[k];
    if (ops.empty() || next() % 2 == 0) {
      ops.push_back(probe(1h));
      p.purgatory.try_complete_else_watch(ops.back(), {kKeys[k]});
    } else {
      // Complete all of this key's operations: its list empties and its entry is erased.
      for (auto& op : ops)
        op->completable = true;
      REQUIRE(p.purgatory.check_and_complete(kKeys[k]) == ops.size());
      for (const auto& op : ops)
        REQUIRE(op->completions == 1);
      ops.clear();
    }
    std::size_t total = 0;
    for (const auto& w : waiting)
      total += w.size();
    REQUIRE(p.purgatory.watched() == total);
  }
  const auto snap = p.purgatory.snapshot();
  std::size_t keys_waiting = 0;
  for (const auto& w : waiting)
    keys_waiting += w.empty() ? 0 : 1;
  CHECK(snap.keys_total == keys_waiting);
  for (std::size_t k = 0; k < kKeys.size(); ++k) {
    for (auto& op : waiting[k])
      op->completable = true;
    CHECK(p.purgatory.check_and_complete(kKeys[k]) == waiting[k].size());
  }
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.snapshot().keys_total == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: key entries come from the pool: once warm, watching on keys "
    "nobody watches and completing there (which erases them) allocates nothing from the heap") {
  if (!contract::counting_allocations() || !purgatory::detail::kTaskPoolOn) {
    MESSAGE("allocations not counted or the pool is off (sanitizers): unchecked");
    return;
  }
  ManualPurgatory<int> p;
  auto round = [&](int from, int count) {
    for (int i = 0; i < count; ++i) {
      auto op = probe(1h);
      const int k = from + 3 * i;
      p.purgatory.try_complete_else_watch(op, {k, k + 1, k + 2});
      CHECK(op->force_complete());
    }
  };
  round(0, 1000);  // warms the pool, the shards' bucket arrays and per-thread state
  const auto before = contract::allocation_counts();
  round(1000000, 1000);
  const auto after = contract::allocation_counts();
  CHECK(after.allocations - before.allocations == 0);
  CHECK(p.purgatory.snapshot().keys_total == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: errors: std::invalid_argument for a null operation or empty "
    "keys, OperationAlreadyWatched, each message names the purgatory") {
  PurgatoryOptions options;
  options.name = "orders";
  ManualPurgatory<int> p(options);
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(nullptr, {1}), std::invalid_argument);
  CHECK(what_of([&] { p.purgatory.try_complete_else_watch(nullptr, {1}); }).find("null") !=
        std::string::npos);
  auto op = probe(1s);
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, std::span<const int>{}),
                  std::invalid_argument);
  const std::string empty =
      what_of([&] { p.purgatory.try_complete_else_watch(op, std::span<const int>{}); });
  CHECK(empty.find("'orders'") != std::string::npos);
  CHECK(empty.find("keys is empty") != std::string::npos);
  CHECK_FALSE(op->was_watched());
  p.purgatory.try_complete_else_watch(op, {1});
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, {1}), OperationAlreadyWatched);
  CHECK(what_of([&] { p.purgatory.try_complete_else_watch(op, {2}); }).find("orders") !=
        std::string::npos);
  CHECK(p.purgatory.watched() == 1);  // the refused calls changed nothing
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: after shutdown() every call but the getters throws "
    "PurgatoryShutDown naming the purgatory and the call") {
  PurgatoryOptions options;
  options.name = "fetch";
  options.shards = 5;
  ManualPurgatory<int> p(options);
  p.purgatory.shutdown();
  auto op = probe(1s);
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, {1}), PurgatoryShutDown);
  CHECK_THROWS_AS(p.purgatory.check_and_complete(1), PurgatoryShutDown);
  CHECK_THROWS_AS(p.purgatory.cancel_for_key(1), PurgatoryShutDown);
  const std::string check = what_of([&] { p.purgatory.check_and_complete(1); });
  CHECK(check.find("fetch") != std::string::npos);
  CHECK(check.find("check_and_complete") != std::string::npos);
  CHECK(what_of([&] { p.purgatory.cancel_for_key(1); }).find("cancel_for_key") !=
        std::string::npos);
  CHECK(what_of([&] {
          p.purgatory.try_complete_else_watch(op, {1});
        }).find("try_complete_else_watch") != std::string::npos);
  CHECK_FALSE(op->was_watched());
  // The getters still answer.
  CHECK_NOTHROW(p.purgatory.shutdown());
  CHECK(p.purgatory.is_shut_down());
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.purgatory.metrics().name == "fetch");
  CHECK(p.purgatory.name() == "fetch");
  CHECK(p.purgatory.shard_count() == 8);
  CHECK(&p.purgatory.timer() == &p.manual.timer);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: constructors: a null shared timer and a shard count outside "
    "[1, 65536] throw std::invalid_argument naming the value, shards round up to a power of two") {
  CHECK_THROWS_AS(DelayedOperationPurgatory<int>(std::shared_ptr<SystemTimer>{}),
                  std::invalid_argument);
  ManualTimer manual;
  for (const std::size_t bad : {std::size_t{0}, std::size_t{65537}}) {
    PurgatoryOptions options;
    options.name = "bad";
    options.shards = bad;
    const std::string what =
        what_of([&] { DelayedOperationPurgatory<int> p(manual.timer, options); });
    CHECK(what.find(std::to_string(bad)) != std::string::npos);
    CHECK(what.find("'bad'") != std::string::npos);
  }
  for (const auto& [asked, got] : std::vector<std::pair<std::size_t, std::size_t>>{
           {1, 1}, {5, 8}, {16, 16}, {17, 32}, {65536, 65536}}) {
    PurgatoryOptions options;
    options.shards = asked;
    DelayedOperationPurgatory<int> p(manual.timer, options);
    CHECK(p.shard_count() == got);
  }
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: a purgatory with its own SystemTimer builds it from "
    "options.timer (named after the purgatory unless named) and closes it in shutdown(), a "
    "shared timer is not closed") {
  ManualClock clock;
  PurgatoryOptions options;
  options.name = "produce";
  options.timer = ManualTimer::options(clock);
  options.timer.name = TimerOptions{}.name;
  options.timer.tick = 2ms;
  {
    DelayedOperationPurgatory<int> owned(options);
    CHECK(owned.timer().name() == "produce");
    CHECK(owned.timer().tick() == 2ms);
    CHECK(&owned.timer().clock() == &clock);
    owned.shutdown();
    CHECK(owned.timer().is_closed());
  }
  options.timer.name = "mine";
  DelayedOperationPurgatory<int> named(options);
  CHECK(named.timer().name() == "mine");

  ManualTimer manual;
  {
    DelayedOperationPurgatory<int> sharing(manual.timer);
    auto op = probe(1s);
    sharing.try_complete_else_watch(op, {1});
    sharing.shutdown();
    CHECK(op->outcome() == Outcome::shut_down);
    CHECK(manual.timer.size() == 0);  // its timeout left the shared timer
  }
  CHECK_FALSE(manual.timer.is_closed());
  auto task = make_task([] {});
  CHECK_NOTHROW(manual.timer.add(task, 1ms));
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: the destructor shuts down: waiting operations complete with "
    "Outcome::shut_down") {
  ManualTimer manual;
  auto op = probe(1s);
  {
    DelayedOperationPurgatory<int> p(manual.timer);
    p.try_complete_else_watch(op, {1, 2});
  }
  CHECK(op->outcome() == Outcome::shut_down);
  CHECK(op->completions == 1);
  CHECK(op->seen_in_on_complete.load() == Outcome::shut_down);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: try_complete_else_watch() tries, watches on every key, "
    "tries once more, and only then schedules the timeout, returns false while it waits") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  std::size_t watched_at_second_try = 0;
  std::size_t timer_at_second_try = 99;
  op->on_try = [&] {
    if (op->tries == 2) {
      watched_at_second_try = p.purgatory.watched();
      timer_at_second_try = p.manual.timer.size();
    }
    return false;
  };
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1, 2, 3}));
  CHECK(op->tries == 2);
  CHECK(watched_at_second_try == 3);  // linked on every key before the second try
  CHECK(timer_at_second_try == 0);    // the timeout comes last
  CHECK(p.manual.timer.size() == 1);
  CHECK(p.purgatory.watched() == 3);
  CHECK(p.purgatory.num_delayed() == 1);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: an operation watched with a timeout <= 0 does not expire "
    "inside try_complete_else_watch(): it waits on its keys until the timer's next pass expires "
    "it, and a check may still complete it first") {
  ManualPurgatory<int> p;
  auto zero = probe(0ms);
  auto negative = probe(-5ms);
  auto checked = probe(0ms);
  CHECK_FALSE(p.purgatory.try_complete_else_watch(zero, {1}));
  CHECK_FALSE(p.purgatory.try_complete_else_watch(negative, {1, 2}));
  CHECK_FALSE(p.purgatory.try_complete_else_watch(checked, {3}));
  CHECK(zero->outcome() == Outcome::pending);
  CHECK(negative->outcome() == Outcome::pending);
  CHECK(zero->expirations == 0);
  CHECK(p.purgatory.num_delayed() == 3);
  checked->completable = true;
  CHECK(p.purgatory.check_and_complete(3) == 1);  // before the pass: completed, not expired
  p.advance(0ms);                                 // the clock has not moved
  CHECK(zero->outcome() == Outcome::expired);
  CHECK(negative->outcome() == Outcome::expired);
  CHECK(checked->outcome() == Outcome::completed);
  CHECK(zero->completions + negative->completions + checked->completions == 3);
  CHECK(zero->expirations + negative->expirations + checked->expirations == 2);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.manual.timer.size() == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: a completion that became possible between the first try "
    "and the watch is not missed: the second try completes it and the call returns true") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  op->on_try = [&] { return op->tries == 2; };
  CHECK(p.purgatory.try_complete_else_watch(op, {1, 2}));
  CHECK(op->outcome() == Outcome::completed);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.manual.timer.size() == 0);
  CHECK(p.purgatory.metrics().completed_total == 1);

  auto first_try = probe(1s);
  first_try->completable = true;
  CHECK(p.purgatory.try_complete_else_watch(first_try, {1}));
  CHECK(first_try->tries == 1);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.metrics().completed_total == 2);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: an operation completed before try_complete_else_watch() is "
    "returned false and not watched") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  CHECK(op->force_complete());
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1}));
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.manual.timer.size() == 0);
  CHECK(op->completions == 1);
  CHECK(op->tries == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: a key listed more than once is watched once (one pair, one "
    "try per check)") {
  // Distinct keys are found pairwise up to 16 keys, by hashing past that: both ways, each checked.
  for (const std::size_t copies : {2U, 11U, 40U}) {
    CAPTURE(copies);
    ManualPurgatory<int> p;
    auto op = probe(1s);
    std::vector<int> keys(copies, 7);
    keys.insert(keys.begin() + 1, 8);  // 7, 8, 7, ...
    p.purgatory.try_complete_else_watch(op, std::span<const int>(keys));
    CHECK(p.purgatory.watched() == 2);
    const int before = op->tries;
    CHECK(p.purgatory.check_and_complete(7) == 0);
    CHECK(op->tries == before + 1);
    CHECK(p.purgatory.check_and_complete(8) == 0);
    CHECK(op->tries == before + 2);
    op->completable = true;
    CHECK(p.purgatory.check_and_complete(7) == 1);
    CHECK(p.purgatory.watched() == 0);
  }
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: if the timer refuses the timeout (closed, or at "
    "max_pending) the operation expires at once") {
  ManualTimer manual(1ms, 20, /*max_pending=*/1);
  DelayedOperationPurgatory<int> p(manual.shared);
  auto first = probe(1s);
  auto second = probe(1s);
  CHECK_FALSE(p.try_complete_else_watch(first, {1}));
  CHECK_FALSE(p.try_complete_else_watch(second, {1}));
  CHECK(first->outcome() == Outcome::pending);
  CHECK(second->outcome() == Outcome::expired);  // at max_pending
  CHECK(second->expirations == 1);
  CHECK(p.watched() == 1);
  (void)manual.timer.close();
  auto third = probe(1s);
  CHECK_FALSE(p.try_complete_else_watch(third, {2}));
  CHECK(third->outcome() == Outcome::expired);  // closed
  CHECK(third->completions == 1);
  CHECK(third->expirations == 1);
  CHECK(p.metrics().expired_total == 2);
  CHECK(p.watched() == 1);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: refused when hashing a key throws: nothing stays behind, "
    "and a retry works") {
  ManualTimer manual;
  DelayedOperationPurgatory<int, ThrowingHash> p(manual.timer);
  auto op = probe(1s);
  CHECK_THROWS_AS(p.try_complete_else_watch(op, {1, 666}), std::runtime_error);
  check_refused_left_nothing(p, manual.timer, op, 0);
  op->completable = true;
  CHECK(p.try_complete_else_watch(op, {1, 2}));  // completable now: the retry completes it
  CHECK(op->completions == 1);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: refused when copying a key into the purgatory throws: "
    "nothing stays behind, and a retry works") {
  ManualTimer manual;
  DelayedOperationPurgatory<FragileKey, FragileKeyHash> p(manual.timer);
  auto anchor = probe(1h);
  const std::array<FragileKey, 1> existing{FragileKey(1)};
  p.try_complete_else_watch(anchor, std::span<const FragileKey>(existing));
  auto op = probe(1s);
  const std::array<FragileKey, 3> keys{FragileKey(1), FragileKey(2), FragileKey(3)};
  FragileKey::fail_copies = true;  // key 1 is already in the map; key 2 must be copied in
  watch_expecting_copy_failure(p, op, keys);
  CHECK(p.watched() == 1);  // the anchor alone
  CHECK(p.num_delayed() == 1);
  CHECK(manual.timer.size() == 1);
  CHECK_FALSE(op->was_watched());
  CHECK(op->outcome() == Outcome::pending);
  CHECK_FALSE(p.try_complete_else_watch(op, std::span<const FragileKey>(keys)));
  CHECK(p.watched() == 4);
  CHECK(p.check_and_complete(FragileKey(1)) == 0);
  CHECK(op->force_complete());
  CHECK(p.watched() == 1);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: refused when the timer throws after the keys were linked "
    "(the operation is pending in another timer): nothing stays behind, and a retry works") {
  ManualPurgatory<int> p;
  ManualTimer other;
  auto op = probe(1s);
  other.timer.add(timeout_task(*op), 1h);
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, {1, 2, 3}), std::invalid_argument);
  check_refused_left_nothing(p.purgatory, p.manual.timer, op, 0);
  CHECK(cancel_timeout(*op));  // free it from the other timer
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1, 2, 3}));
  CHECK(p.purgatory.watched() == 3);
  p.advance(1s);
  CHECK(op->outcome() == Outcome::expired);
  CHECK(p.purgatory.watched() == 0);
}

}  // namespace
}  // namespace purgatory::test
