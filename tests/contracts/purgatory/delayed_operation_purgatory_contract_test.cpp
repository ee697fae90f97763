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

#include "../../purgatory/purgatory_test_support.hpp"
#include "../contract_support.hpp"
#include "allocation_counter.hpp"
#include "purgatory/timer/detail/task_pool.hpp"
#include "purgatory_contract_support.hpp"
#include "race_schedule.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

using contract::probe;
using contract::ProbeRef;
using contract::rounds;
using contract::Signal;

// Hashing key 666 throws: a refused watch after other keys were linked.
struct ThrowingHash {
  std::size_t operator()(int key) const {
    if (key == 666) throw std::runtime_error("cannot hash 666");
    return std::hash<int>{}(key);
  }
};

// Hashes as std::hash; while `probe` is set, calls it first (from whichever thread hashes).
struct ProbingHash {
  static inline std::function<void()> probe;
  std::size_t operator()(int key) const {
    if (probe) probe();
    return std::hash<int>{}(key);
  }
};

// A key whose copy throws while `fail_copies` is set: the purgatory copies keys into its map.
struct FragileKey {
  static inline std::atomic<bool> fail_copies{false};
  int value = 0;
  explicit FragileKey(int v) : value(v) {}
  FragileKey(const FragileKey& other) : value(other.value) {
    if (fail_copies.load()) throw std::bad_alloc();
  }
  FragileKey& operator=(const FragileKey&) = default;
  bool operator==(const FragileKey& other) const { return value == other.value; }
};
struct FragileKeyHash {
  std::size_t operator()(const FragileKey& k) const { return std::hash<int>{}(k.value); }
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
  PurgatoryOptions options;
  options.shards = 1;
  ManualPurgatory<int> p(options);
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
  PurgatoryOptions options;
  options.shards = 1;
  ManualPurgatory<int> p(options);
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
  CHECK(&p.purgatory.timer() == p.manual.timer.get());
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: constructors: a null shared timer and a shard count outside "
    "[1, 65536] throw std::invalid_argument naming the value, shards round up to a power of two") {
  CHECK_THROWS_AS(DelayedOperationPurgatory<int>(std::shared_ptr<SystemTimer>{}),
                  std::invalid_argument);
  SharedManualTimer manual;
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
  options.timer = SharedManualTimer::options(clock);
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

  SharedManualTimer manual;
  {
    DelayedOperationPurgatory<int> sharing(manual.timer);
    auto op = probe(1s);
    sharing.try_complete_else_watch(op, {1});
    sharing.shutdown();
    CHECK(op->outcome() == Outcome::shut_down);
    CHECK(manual.timer->size() == 0);  // its timeout left the shared timer
  }
  CHECK_FALSE(manual.timer->is_closed());
  auto task = make_task([] {});
  CHECK_NOTHROW(manual.timer->add(task, 1ms));
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: the destructor shuts down: waiting operations complete with "
    "Outcome::shut_down") {
  SharedManualTimer manual;
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
      timer_at_second_try = p.manual.timer->size();
    }
    return false;
  };
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1, 2, 3}));
  CHECK(op->tries == 2);
  CHECK(watched_at_second_try == 3);  // linked on every key before the second try
  CHECK(timer_at_second_try == 0);    // the timeout comes last
  CHECK(p.manual.timer->size() == 1);
  CHECK(p.purgatory.watched() == 3);
  CHECK(p.purgatory.num_delayed() == 1);
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
  CHECK(p.manual.timer->size() == 0);
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
  CHECK(p.manual.timer->size() == 0);
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
  ManualClock clock;
  TimerOptions to = SharedManualTimer::options(clock);
  to.max_pending = 1;
  auto timer = std::make_shared<SystemTimer>(to);
  DelayedOperationPurgatory<int> p(timer);
  auto first = probe(1s);
  auto second = probe(1s);
  CHECK_FALSE(p.try_complete_else_watch(first, {1}));
  CHECK_FALSE(p.try_complete_else_watch(second, {1}));
  CHECK(first->outcome() == Outcome::pending);
  CHECK(second->outcome() == Outcome::expired);  // at max_pending
  CHECK(second->expirations == 1);
  CHECK(p.watched() == 1);
  (void)timer->close();
  auto third = probe(1s);
  CHECK_FALSE(p.try_complete_else_watch(third, {2}));
  CHECK(third->outcome() == Outcome::expired);  // closed
  CHECK(third->completions == 1);
  CHECK(third->expirations == 1);
  CHECK(p.metrics().expired_total == 2);
  CHECK(p.watched() == 1);
}

// What a refused call must leave: nothing of the operation anywhere, and a retry that works.
template <class P>
void check_refused_left_nothing(P& purgatory, SystemTimer& timer, const ProbeRef& op,
                                std::size_t timer_size_before) {
  CHECK(purgatory.watched() == 0);
  CHECK(purgatory.num_delayed() == 0);
  CHECK(timer.size() == timer_size_before);
  CHECK_FALSE(op->was_watched());
  CHECK(op->outcome() == Outcome::pending);
  CHECK(op->completions == 0);
  const auto m = purgatory.metrics();
  CHECK(m.completed_total + m.expired_total + m.shut_down_total + m.cancelled_total == 0);
}

// Watches `op` on `keys`, which must be refused by a key copy throwing (FragileKey::fail_copies,
// set by the caller or meanwhile); key copies work again afterwards.
template <class P, std::size_t N>
void watch_expecting_copy_failure(P& purgatory, const ProbeRef& op,
                                  const std::array<FragileKey, N>& keys) {
  CHECK_THROWS_AS(purgatory.try_complete_else_watch(op, std::span<const FragileKey>(keys)),
                  std::bad_alloc);
  FragileKey::fail_copies = false;
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: refused when hashing a key throws: nothing stays behind, "
    "and a retry works") {
  SharedManualTimer manual;
  DelayedOperationPurgatory<int, ThrowingHash> p(manual.timer);
  auto op = probe(1s);
  CHECK_THROWS_AS(p.try_complete_else_watch(op, {1, 666}), std::runtime_error);
  check_refused_left_nothing(p, *manual.timer, op, 0);
  op->completable = true;
  CHECK(p.try_complete_else_watch(op, {1, 2}));  // completable now: the retry completes it
  CHECK(op->completions == 1);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: refused when copying a key throws after other keys were "
    "linked: nothing stays behind, checks meanwhile do not complete it, and a retry works") {
  SharedManualTimer manual;
  DelayedOperationPurgatory<FragileKey, FragileKeyHash> p(manual.timer);
  auto op = probe(1s);
  const std::array<FragileKey, 2> keys{FragileKey(1), FragileKey(2)};
  bool first = true;
  std::size_t checked = 99;
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedOperationPurgatory::watch: linked a key", [&] {
                                        if (!std::exchange(first, false)) return;
                                        op->completable = true;
                                        // A check of the linked key, from another thread.
                                        std::thread t(
                                            [&] { checked = p.check_and_complete(FragileKey(1)); });
                                        t.join();
                                        // Key 2 is new to the map: copying it in throws.
                                        FragileKey::fail_copies = true;
                                      }}}});
  watch_expecting_copy_failure(p, op, keys);
  CHECK(!first);  // the throw came after key 1 was linked
  CHECK(checked == 0);
  check_refused_left_nothing(p, *manual.timer, op, 0);
  CHECK(op->tries == 1);  // the check's note died with the refused watch
  CHECK(p.check_and_complete(FragileKey(1)) == 0);
  // Completable now: the retry completes it.
  CHECK(p.try_complete_else_watch(op, std::span<const FragileKey>(keys)));
  CHECK(op->completions == 1);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: refused when copying a key into the purgatory throws: "
    "nothing stays behind, and a retry works") {
  SharedManualTimer manual;
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
  CHECK(manual.timer->size() == 1);
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
  SharedManualTimer other;
  auto op = probe(1s);
  other.timer->add(timeout_task(*op), 1h);
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, {1, 2, 3}), std::invalid_argument);
  check_refused_left_nothing(p.purgatory, *p.manual.timer, op, 0);
  CHECK(cancel_timeout(*op));  // free it from the other timer
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1, 2, 3}));
  CHECK(p.purgatory.watched() == 3);
  p.advance(1s);
  CHECK(op->outcome() == Outcome::expired);
  CHECK(p.purgatory.watched() == 0);
}

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
  ManualPurgatory<int> p;
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
  ManualPurgatory<int> p(options);
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
  SharedManualTimer manual;
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
  bool first = true;
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"check_and_complete: copied", [&] {
                                        if (!std::exchange(first, false)) return;
                                        CHECK(completed->force_complete());
                                        p.advance(5ms);
                                        handed_back = p.purgatory.cancel_for_key(30);
                                        for (const auto& op : {completed, expired, cancelled})
                                          op->completable = true;
                                      }}}});
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
  CHECK(p.manual.timer->size() == 1);
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
    "delayed_operation_purgatory.hpp: cancel_for_key() leaves alone an operation whose expiry "
    "already started: the expiry keeps its course") {
  ManualPurgatory<int> p;
  auto op = probe(5ms);
  p.purgatory.try_complete_else_watch(op, {1});
  std::vector<OperationRef> handed{OperationRef()};
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedOperation::complete_with: still pending", [&] {
                                        std::thread t(
                                            [&] { handed = p.purgatory.cancel_for_key(1); });
                                        t.join();
                                      }}}});
  p.advance(5ms);  // the expiry runs here and pauses before the operation's lock
  CHECK(schedule.hits("complete_with: still pending") == 1);
  CHECK(handed.empty());
  CHECK(op->outcome() == Outcome::expired);
  CHECK(op->expirations == 1);
  CHECK(p.purgatory.metrics().cancelled_total == 0);
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

TEST_CASE(
    "delayed_operation_purgatory.hpp: cancel_for_key() between the timer's claim of the run and "
    "the run itself: the operation is handed back, and the run that follows does not expire it") {
  ManualPurgatory<int> p;
  auto op = probe(5ms);
  p.purgatory.try_complete_else_watch(op, {1});
  std::vector<OperationRef> handed;
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"ExpiredBatch::run_all: claimed, before run", [&] {
                                        std::thread t(
                                            [&] { handed = p.purgatory.cancel_for_key(1); });
                                        t.join();
                                      }}}});
  p.advance(5ms);  // the timer claims the run; cancel_for_key() comes before run() is called
  CHECK(schedule.hits("claimed, before run") == 1);
  REQUIRE(handed.size() == 1);
  CHECK(op->outcome() == Outcome::pending);  // never expired: handed back, the caller's
  CHECK(op->expirations == 0);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
  CHECK(p.purgatory.metrics().expired_total == 0);
  CHECK(op->force_complete());
}

TEST_CASE("delayed_operation_purgatory.hpp: cancel_for_key() waits for each operation's lock") {
  ManualPurgatory<int> p;
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
    "delayed_operation_purgatory.hpp: cancel_for_key() racing checks, expiries and shutdown "
    "(seeded schedule): each operation is handed back (then decided by its caller) or decided by "
    "the purgatory, never both, the totals agree") {
  const int n = rounds(150, 30);
  std::uint64_t handed_total = 0;
  for (int round = 0; round < n; ++round) {
    const std::uint64_t seed = RaceSchedule::seed(static_cast<std::uint64_t>(round));
    INFO("seed " << seed);
    PurgatoryOptions options;
    options.shards = 2;
    ManualPurgatory<int> p(options);
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
  }
  MESSAGE("handed back " << handed_total);
  CHECK(handed_total > 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: watched() and num_delayed() are exact while nothing "
    "changes") {
  PurgatoryOptions options;
  options.shards = 64;
  ManualPurgatory<int> p(options);
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

TEST_CASE(
    "delayed_operation_purgatory.hpp: watched() and num_delayed() read during concurrent watches "
    "and completions are never negative (never above the pairs ever linked, seeded schedule)") {
  const int n = rounds(30, 8);
  std::uint64_t sum_pauses = 0;
  for (int round = 0; round < n; ++round) {
    const std::uint64_t seed = RaceSchedule::seed(static_cast<std::uint64_t>(round));
    INFO("seed " << seed);
    PurgatoryOptions options;
    options.shards = 8;
    ManualPurgatory<int> p(options);
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
  }
  CHECK(sum_pauses > 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown() stops accepting calls, then gives every waiting "
    "operation exactly one outcome: shut_down, seen by on_complete() in outcome()") {
  ManualPurgatory<int> p;
  std::vector<ProbeRef> ops;
  for (int i = 0; i < 10; ++i) {
    ops.push_back(probe(1s));
    p.purgatory.try_complete_else_watch(ops.back(), {i % 3, 10 + i});
  }
  std::atomic<int> refused_in_callback{0};
  ops[0]->on_done = [&] {
    try {
      auto late = probe(1s);
      p.purgatory.try_complete_else_watch(late, {1});
    } catch (const PurgatoryShutDown&) {
      refused_in_callback.fetch_add(1);  // already refusing while it completes them
    }
  };
  p.purgatory.shutdown();
  CHECK(refused_in_callback == 1);
  for (const auto& op : ops) {
    CHECK(op->outcome() == Outcome::shut_down);
    CHECK(op->seen_in_on_complete.load() == Outcome::shut_down);
    CHECK(op->completions == 1);
    CHECK(op->expirations == 0);
  }
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.metrics().shut_down_total == 10);
  CHECK(p.manual.timer->size() == 0);
}

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
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedOperationPurgatory::shutdown: found",
                                      [&] { shutdown_found_it.set(); }}}});
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
    "delayed_operation_purgatory.hpp: shutdown() with a timer the purgatory owns: a timeout "
    "already due keeps Outcome::expired (close() lets it run), the others are shut down") {
  ManualClock clock;
  PurgatoryOptions options;
  options.timer = SharedManualTimer::options(clock);
  options.timer.executor = nullptr;  // the timer's own ThreadExecutor
  DelayedOperationPurgatory<int> p(options);
  // A task that keeps the executor busy, so the due timeout waits in its queue.
  Signal blocker_running;
  Signal release_blocker;
  auto blocker = make_task([&] {
    blocker_running.set();
    (void)release_blocker.wait();
  });
  p.timer().add(blocker, 1ms);
  auto due = probe(2ms);
  auto later = probe(1h);
  p.try_complete_else_watch(due, {1});
  p.try_complete_else_watch(later, {2});
  clock.advance(1ms);
  (void)p.timer().advance_clock(Nanos::zero());  // the blocker starts
  REQUIRE(blocker_running.wait());
  clock.advance(1ms);
  (void)p.timer().advance_clock(Nanos::zero());  // the timeout is queued behind it
  CHECK(due->outcome() == Outcome::pending);     // queued behind the blocker
  std::thread shutter([&] { p.shutdown(); });
  CHECK(eventually([&] { return p.is_shut_down(); }));
  release_blocker.set();
  shutter.join();
  CHECK(due->outcome() == Outcome::expired);
  CHECK(due->expirations == 1);
  CHECK(later->outcome() == Outcome::shut_down);
  CHECK(p.timer().is_closed());
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown() with a shared timer: a timeout due but not yet "
    "run is shut down, not expired") {
  ManualPurgatory<int> p;
  auto op = probe(1ms);
  p.purgatory.try_complete_else_watch(op, {1});
  p.manual.clock.advance(5ms);  // due, but nobody advanced the timer
  p.purgatory.shutdown();
  CHECK(op->outcome() == Outcome::shut_down);
  p.manual.timer->advance_clock(Nanos::zero());
  CHECK(op->completions == 1);
  CHECK(op->expirations == 0);
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
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedOperationPurgatory::shutdown: completed all",
                                      [&] { shutdown_waiting.set(); }}}});
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
    "delayed_operation_purgatory.hpp: shutdown() called from an operation's callback returns (it "
    "does not wait for the callback it runs in) and shuts down the others") {
  ManualPurgatory<int> p;
  auto caller = probe(1s);
  auto other = probe(1s);
  p.purgatory.try_complete_else_watch(caller, {1});
  p.purgatory.try_complete_else_watch(other, {2});
  bool returned = false;
  caller->on_done = [&] {
    p.purgatory.shutdown();
    returned = true;
  };
  CHECK(caller->force_complete());
  CHECK(returned);
  CHECK(other->outcome() == Outcome::shut_down);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: the purgatory may be destroyed from an operation's callback "
    "(not run by its own timer): the operation's last steps touch nothing freed") {
  // Operations point at their purgatory without owning it; the completing thread keeps the
  // purgatory's shared state alive until its callbacks are done (ASan reports a use after free
  // otherwise).
  auto purgatory = std::make_unique<DelayedOperationPurgatory<int>>();
  auto caller = probe(1h);
  auto other = probe(1h);
  purgatory->try_complete_else_watch(caller, {1});
  purgatory->try_complete_else_watch(other, {2});
  bool destroyed = false;
  caller->on_done = [&] {
    purgatory.reset();
    destroyed = true;
  };
  CHECK(caller->force_complete());
  CHECK(destroyed);
  CHECK(caller->outcome() == Outcome::completed);
  CHECK(other->outcome() == Outcome::shut_down);
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
    "delayed_operation_purgatory.hpp: shutdown() called from the error handler, reporting what "
    "try_complete() threw, returns (it does not wait for that report)") {
  ManualPurgatory<int>* purgatory = nullptr;
  bool returned = false;
  PurgatoryOptions options;
  options.on_callback_error = [&](const DelayedOperation&, std::exception_ptr, std::string_view) {
    purgatory->purgatory.shutdown();
    returned = true;
  };
  ManualPurgatory<int> p(options);
  purgatory = &p;
  bool fail = false;
  auto op = make_operation(
      1s,
      [&]() -> bool {
        if (fail) throw std::runtime_error("condition broke");
        return false;
      },
      [] {});
  auto other = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  p.purgatory.try_complete_else_watch(other, {1});
  fail = true;
  CHECK(p.purgatory.check_and_complete(1) == 0);
  CHECK(returned);
  CHECK(op->outcome() == Outcome::shut_down);
  CHECK(other->outcome() == Outcome::shut_down);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown() is idempotent: a second call returns at once, "
    "even while the first still waits for callbacks") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  Signal release;
  Signal in_callback;
  op->on_done = [&] {
    in_callback.set();
    CHECK(release.wait());
  };
  std::thread first([&] { p.purgatory.shutdown(); });  // decides shut_down; the callback blocks
  REQUIRE(in_callback.wait());
  p.purgatory.shutdown();  // the second call: returns although the first still waits
  CHECK(p.purgatory.is_shut_down());
  release.set();
  first.join();
  CHECK(op->outcome() == Outcome::shut_down);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown() racing checks, force_complete and expiries "
    "(seeded schedule): one outcome each, and every callback has run when it returns") {
  const int n = rounds(150, 30);
  int shut = 0;
  for (int round = 0; round < n; ++round) {
    const std::uint64_t seed = RaceSchedule::seed(static_cast<std::uint64_t>(round));
    INFO("seed " << seed);
    PurgatoryOptions options;
    options.shards = 4;
    ManualPurgatory<int> p(options);
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
  }
  MESSAGE("shut down " << shut << " of " << n * 8);
  CHECK(shut > 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: thread-safe: every member from any thread, including from "
    "callbacks, while shutdown() runs, one outcome each, none for a refused watch, and the totals "
    "agree with the outcomes (seeded schedule)") {
  const int n = rounds(60, 12);
  for (int round = 0; round < n; ++round) {
    const std::uint64_t seed = RaceSchedule::seed(static_cast<std::uint64_t>(round));
    INFO("seed " << seed);
    PurgatoryOptions options;
    options.shards = 4;
    ManualPurgatory<int> p(options);
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
  }
}

}  // namespace
}  // namespace purgatory::test
