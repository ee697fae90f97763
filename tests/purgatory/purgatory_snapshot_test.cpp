#include "purgatory/purgatory_snapshot.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/detail/operation_access.hpp"
#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

using Snapshot = PurgatorySnapshot<std::string>;

const Snapshot::KeyEntry* find_key(const Snapshot& snap, const std::string& key) {
  const auto it = std::find_if(snap.keys.begin(), snap.keys.end(),
                               [&](const Snapshot::KeyEntry& e) { return e.key == key; });
  return it == snap.keys.end() ? nullptr : &*it;
}

TEST_CASE("snapshot: per key, the oldest operations in waiting order with deadline and keys") {
  ManualPurgatory<std::string> p;
  p.advance(1s);  // watched-since 0 means "not yet recorded": start the clock elsewhere
  std::vector<MockRef> ops;
  for (int i = 0; i < 6; ++i) {
    ops.push_back(mock(std::chrono::milliseconds(100 * (i + 1))));
    p.purgatory.try_complete_else_watch(ops.back(), {"demo-0"});
    p.advance(10ms);
  }
  auto both = mock(500ms);
  p.purgatory.try_complete_else_watch(both, {"demo-0", "demo-1"});

  const Snapshot snap = p.purgatory.snapshot(SnapshotLimits{64, 4});
  CHECK(snap.now == 1060ms);
  CHECK(snap.keys_total == 2);
  CHECK(snap.delayed == 7);
  const auto* demo0 = find_key(snap, "demo-0");
  REQUIRE(demo0 != nullptr);
  CHECK(demo0->waiting == 7);
  REQUIRE(demo0->operations.size() == 4);  // the 4 oldest of 7
  for (int i = 0; i < 4; ++i) {
    const auto& op = demo0->operations[static_cast<std::size_t>(i)];
    CHECK(op.watched_since == 1s + std::chrono::milliseconds(10 * i));
    CHECK(op.timeout == std::chrono::milliseconds(100 * (i + 1)));
    CHECK(op.deadline == op.watched_since + op.timeout);
    CHECK(op.key_count == 1);
  }
  const auto* demo1 = find_key(snap, "demo-1");
  REQUIRE(demo1 != nullptr);
  CHECK(demo1->waiting == 1);
  REQUIRE(demo1->operations.size() == 1);
  CHECK(demo1->operations[0].key_count == 2);
  CHECK(demo1->operations[0].deadline == 1060ms + 500ms);
}

TEST_CASE("snapshot: bounded to max_keys keys and max_operations_per_key, totals stay exact") {
  PurgatoryOptions options;
  options.shards = 4;
  ManualPurgatory<std::string> p(options);
  p.advance(1s);
  for (int k = 0; k < 100; ++k) {
    for (int i = 0; i < 30; ++i) {
      p.purgatory.try_complete_else_watch(mock(1s), {std::to_string(k)});
    }
  }
  const Snapshot snap = p.purgatory.snapshot(SnapshotLimits{10, 3});
  CHECK(snap.keys.size() == 10);
  CHECK(snap.keys_total == 100);
  CHECK(snap.delayed == 3000);
  for (const auto& e : snap.keys) {
    CHECK(e.waiting == 30);
    CHECK(e.operations.size() == 3);
  }
  const Snapshot none = p.purgatory.snapshot(SnapshotLimits{0, 0});
  CHECK(none.keys.empty());
  CHECK(none.keys_total == 100);
  CHECK(none.delayed == 3000);
}

TEST_CASE("snapshot: completed and expired operations leave it at once, shut down it is empty") {
  ManualPurgatory<std::string> p;
  p.advance(1s);
  auto early = mock(1s);
  auto late = mock(200ms);
  auto stays = mock(10s);
  p.purgatory.try_complete_else_watch(early, {"a"});
  p.purgatory.try_complete_else_watch(late, {"a"});
  p.purgatory.try_complete_else_watch(stays, {"b"});
  CHECK(p.purgatory.snapshot().keys_total == 2);

  early->completable = true;
  CHECK(p.purgatory.check_and_complete("a") == 1);
  auto snap = p.purgatory.snapshot();
  REQUIRE(find_key(snap, "a") != nullptr);
  CHECK(find_key(snap, "a")->waiting == 1);
  CHECK(find_key(snap, "a")->operations[0].timeout == 200ms);

  p.advance(300ms);  // `late` expires
  CHECK(late->expirations == 1);
  snap = p.purgatory.snapshot();
  CHECK(find_key(snap, "a") == nullptr);
  CHECK(snap.keys_total == 1);
  CHECK(snap.delayed == 1);

  p.purgatory.shutdown();
  snap = p.purgatory.snapshot();
  CHECK(snap.keys.empty());
  CHECK(snap.keys_total == 0);
  CHECK(snap.delayed == 0);
}

// Counts its calls: the snapshot must run no Hash (nor any other user code but Key's copy).
struct CountingHash {
  static inline std::atomic<int> calls{0};
  std::size_t operator()(const std::string& s) const {
    calls.fetch_add(1);
    return std::hash<std::string>{}(s);
  }
};

TEST_CASE("snapshot: runs no Hash and no callback, callable from try_complete and on_complete") {
  ManualTimer manual;
  manual.advance(1s);
  DelayedOperationPurgatory<std::string, CountingHash> purgatory(manual.timer);
  std::size_t seen_in_try = 0;
  std::size_t seen_in_complete = 0;
  auto op = make_operation(
      1s,
      [&] {
        // Under the operation's lock: the snapshot takes only shard locks (order op -> shard).
        seen_in_try = purgatory.snapshot().delayed;
        return seen_in_try == 2;
      },
      [&] { seen_in_complete = purgatory.snapshot().delayed; });
  purgatory.try_complete_else_watch(op, {"x"});
  purgatory.try_complete_else_watch(mock(1s), {"y"});
  const int hashes = CountingHash::calls.load();
  const auto snap = purgatory.snapshot();
  CHECK(CountingHash::calls.load() == hashes);
  CHECK(snap.keys_total == 2);
  // Serializing it may call the purgatory (no lock is held by anyone): complete `op` meanwhile.
  for (const auto& entry : snap.keys) {
    if (entry.key == "x") CHECK(purgatory.check_and_complete(entry.key) == 1);
  }
  CHECK(seen_in_try == 2);
  CHECK(seen_in_complete == 1);  // `op` had left before its on_complete ran
}

// Invariant: a snapshot never lists an operation whose completion callback had already run when
// the snapshot started, every listed operation is consistent (deadline = since + its own timeout),
// and each key lists at most min(limit, waiting). Operations carry their id in their timeout.
TEST_CASE("snapshot: consistent while 3 threads complete and the timer expires concurrently") {
  PurgatoryOptions options;
  options.shards = 8;
  ManualPurgatory<std::string> p(options);
  p.advance(1s);
  constexpr int kOps = 3000;
  constexpr Nanos kBase = 1h;
  std::vector<std::atomic<bool>> finished(kOps);
  std::vector<MockRef> ops;
  ops.reserve(kOps);
  for (int i = 0; i < kOps; ++i) {
    // Every third operation can only expire (deadlines spread over 0..30 ms past `base`).
    const Nanos timeout =
        i % 3 == 0 ? Nanos(std::chrono::milliseconds(i % 30)) + Nanos(i) : kBase + Nanos(i);
    ops.push_back(mock(timeout));
  }
  struct Done : detail::OutcomeListener {
    explicit Done(std::atomic<bool>& f) : flag(f) {}
    void on_outcome(Outcome) noexcept override { flag.store(true); }
    std::atomic<bool>& flag;
  };
  for (int i = 0; i < kOps; ++i) {
    detail::OperationAccess::listen(*ops[static_cast<std::size_t>(i)],
                                    std::make_unique<Done>(finished[static_cast<std::size_t>(i)]));
    p.purgatory.try_complete_else_watch(ops[static_cast<std::size_t>(i)],
                                        {std::to_string(i % 16), std::to_string((i * 7) % 16)});
  }
  const auto id_of = [&](Nanos timeout) {
    return timeout >= kBase ? (timeout - kBase).count() : (timeout % 1ms).count();
  };

  std::atomic<bool> stop{false};
  std::vector<std::thread> completers;
  for (int t = 0; t < 3; ++t) {
    completers.emplace_back([&, t] {
      for (int i = t; i < kOps; i += 3) {
        if (i % 3 != 0) ops[static_cast<std::size_t>(i)]->force_complete();
      }
    });
  }
  std::thread expirer([&] {
    for (int ms = 0; ms < 40; ++ms) {
      p.advance(1ms);
      std::this_thread::yield();
    }
  });
  std::thread snapshotter([&] {
    int snapshots = 0;
    while (!stop.load() || snapshots < 5) {
      std::vector<bool> done_before(kOps);
      for (int i = 0; i < kOps; ++i)
        done_before[static_cast<std::size_t>(i)] = finished[static_cast<std::size_t>(i)].load();
      const auto snap = p.purgatory.snapshot(SnapshotLimits{64, 50});
      ++snapshots;
      for (const auto& entry : snap.keys) {
        CHECK(entry.waiting >= 1);
        CHECK(entry.operations.size() <= std::min<std::size_t>(50, entry.waiting));
        for (const auto& op : entry.operations) {
          const auto id = static_cast<std::size_t>(id_of(op.timeout));
          REQUIRE(id < static_cast<std::size_t>(kOps));
          CHECK(op.deadline == op.watched_since + op.timeout);
          CHECK(op.watched_since == 1s);
          CHECK((op.key_count == 1 || op.key_count == 2));
          CHECK_FALSE(done_before[id]);
        }
      }
    }
  });
  for (auto& t : completers)
    t.join();
  expirer.join();
  stop = true;
  snapshotter.join();
  const auto last = p.purgatory.snapshot();
  CHECK(last.keys.empty());
  CHECK(last.delayed == 0);
  for (int i = 0; i < kOps; ++i)
    CHECK(finished[static_cast<std::size_t>(i)].load());
}

}  // namespace
}  // namespace purgatory::test
