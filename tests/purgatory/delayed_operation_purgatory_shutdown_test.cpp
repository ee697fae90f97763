// delayed_operation_purgatory.hpp: shutdown(), the destructor from callbacks, and thread safety.
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

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

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
  CHECK(p.manual.timer.size() == 0);
}

TEST_CASE(
    "delayed_operation_purgatory.hpp: shutdown() with a timer the purgatory owns: a timeout "
    "already due keeps Outcome::expired (close() lets it run), the others are shut down") {
  ManualClock clock;
  PurgatoryOptions options;
  options.timer =
      ManualTimer::options(clock, 1ms, 20, 0, 0, TimerOptions::Concurrency::thread_safe);
  options.timer.executor = nullptr;  // the timer's own ThreadExecutor
  DelayedOperationPurgatory<int> p(options);
  ExternalDriver driver(p.timer());
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
  (void)driver.advance_clock();  // the blocker starts
  REQUIRE(blocker_running.wait());
  clock.advance(1ms);
  (void)driver.advance_clock();               // the timeout is queued behind it
  CHECK(due->outcome() == Outcome::pending);  // queued behind the blocker
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
  p.manual.driver.advance_clock(Nanos::zero());
  CHECK(op->completions == 1);
  CHECK(op->expirations == 0);
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
  ManualPurgatory<int> p(TimerOptions::Concurrency::thread_safe);
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  // Decides shut_down; the callback blocks.
  HeldInCallback first(*op, [&] { p.purgatory.shutdown(); });
  REQUIRE(first.entered());
  p.purgatory.shutdown();  // the second call: returns although the first still waits
  CHECK(p.purgatory.is_shut_down());
  first.release();
  CHECK(op->outcome() == Outcome::shut_down);
}

}  // namespace
}  // namespace purgatory::test
