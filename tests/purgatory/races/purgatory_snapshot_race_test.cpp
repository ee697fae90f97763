// DelayedOperationPurgatory::snapshot() promises that once did not hold: each key's operations
// oldest first, and none younger than the snapshot. Each test fails with its fix reverted.
#include "purgatory/purgatory_snapshot.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include <doctest/doctest.h>

#include "manual_timer.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "race_schedule.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

using Snapshot = PurgatorySnapshot<int>;

// A schedule that runs `action` the first time a thread reaches `point`, and never pauses.
RaceSchedule::Options once_at(const char* point, std::function<void()> action) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  return {.pause_probability = 0, .actions = {{point, [done, action = std::move(action)] {
                                                 if (!done->exchange(true)) action();
                                               }}}};
}

// A purgatory on a manual clock, tasks inline.
struct SnapshotFixture {
  ManualClock clock;
  std::shared_ptr<SystemTimer> timer = std::make_shared<SystemTimer>(ManualTimer::options(clock));
  DelayedOperationPurgatory<int> purgatory{timer, options()};

  static PurgatoryOptions options() {
    PurgatoryOptions o;
    o.name = "snap";
    o.shards = 1;
    return o;
  }
};

OperationRef waiting_operation() {
  return make_operation(
      1h, [] { return false; }, [] {});
}

TEST_CASE(
    "regression: a snapshot lists each key's operations oldest first: an operation "
    "that joined a key's list before another but committed its watch later is listed after it") {
  // Operation a links key 7, then (at the race point, on the same thread) operation b is watched
  // on key 7 at 0 ms and the clock moves to 1 ms before a commits: a's list position is ahead of
  // b's, its watched_since later.
  SnapshotFixture f;
  auto a = waiting_operation();
  auto b = waiting_operation();
  RaceSchedule schedule(
      once_at("DelayedOperationPurgatory::watch: linked a key, before the next", [&] {
        f.purgatory.try_complete_else_watch(b, {7});
        f.clock.advance(1ms);
      }));
  f.purgatory.try_complete_else_watch(a, {7});
  const Snapshot snap = f.purgatory.snapshot();
  REQUIRE(snap.keys.size() == 1);
  const auto& ops = snap.keys[0].operations;
  REQUIRE(ops.size() == 2);
  CHECK(ops[0].watched_since == 0ms);
  CHECK(ops[1].watched_since == 1ms);
  f.purgatory.shutdown();
}

TEST_CASE(
    "regression: no operation in a snapshot started waiting after the snapshot's "
    "now (no negative age)") {
  // An operation watched (at 5 ms) while the snapshot is under way, before it reads the shard.
  SnapshotFixture f;
  auto late = waiting_operation();
  RaceSchedule schedule(once_at("DelayedOperationPurgatory::snapshot: before reading a shard", [&] {
    f.clock.advance(5ms);
    f.purgatory.try_complete_else_watch(late, {3});
  }));
  const Snapshot snap = f.purgatory.snapshot();
  REQUIRE(snap.keys.size() == 1);
  REQUIRE(snap.keys[0].operations.size() == 1);
  CHECK(snap.keys[0].operations[0].watched_since == 5ms);
  CHECK(snap.keys[0].operations[0].watched_since <= snap.now);
  f.purgatory.shutdown();
}

}  // namespace
}  // namespace purgatory::test
