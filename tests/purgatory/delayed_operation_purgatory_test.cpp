#include "purgatory/delayed_operation_purgatory.hpp"

#include <atomic>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/errors.hpp"
#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

TEST_CASE("misuse gets a clear error: null op / empty keys / watched twice / bad shard count") {
  ManualPurgatory<int> p;
  auto op = mock(1s);
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(nullptr, {1}), std::invalid_argument);
  CHECK_THROWS_WITH_AS(p.purgatory.try_complete_else_watch(op, std::span<const int>{}),
                       doctest::Contains("keys is empty"), std::invalid_argument);
  CHECK_FALSE(op->was_watched());  // a refused call leaves it usable
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1}));
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, {2}), OperationAlreadyWatched);
  CHECK(p.purgatory.watched() == 1);
  CHECK(p.purgatory.check_and_complete(12345) == 0);  // nobody watches it

  PurgatoryOptions bad;
  bad.shards = 0;
  CHECK_THROWS_AS(DelayedOperationPurgatory<int>(p.manual.timer, bad), std::invalid_argument);
  CHECK_THROWS_AS(DelayedOperationPurgatory<int>(std::shared_ptr<SystemTimer>{}),
                  std::invalid_argument);
}

TEST_CASE("watching one operation from 8 threads at once: one call watches and 7 get an error") {
  ManualPurgatory<int> p;
  for (int round = 0; round < 20; ++round) {
    auto op = mock(1s);
    std::atomic<int> accepted{0};
    std::atomic<int> refused{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load())
          std::this_thread::yield();
        try {
          p.purgatory.try_complete_else_watch(op, {round * 8 + t});
          accepted.fetch_add(1);
        } catch (const OperationAlreadyWatched&) {
          refused.fetch_add(1);
        }
      });
    }
    go = true;
    for (auto& t : threads)
      t.join();
    CHECK(accepted == 1);
    CHECK(refused == 7);
  }
  CHECK(p.purgatory.num_delayed() == 20);
  CHECK(p.purgatory.watched() == 20);
}

TEST_CASE("force_complete on a watched operation removes it from every key and the wheel") {
  ManualPurgatory<int> p;
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1, 2, 3, 4});
  CHECK(p.purgatory.watched() == 4);
  CHECK(p.manual.timer.size() == 1);
  CHECK(op->force_complete());
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.manual.timer.size() == 0);
  p.advance(2s);
  CHECK(op->completions == 1);
  CHECK(op->expirations == 0);
}

TEST_CASE("an operation already completed is not watched") {
  ManualPurgatory<int> p;
  auto op = mock(1s);
  op->force_complete();
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1}));
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.manual.timer.size() == 0);
}

TEST_CASE(
    "shutdown: every waiting operation gets exactly one outcome and later calls are refused") {
  auto manual = std::make_unique<ManualTimer>();
  DelayedOperationPurgatory<int> purgatory(manual->timer);
  std::vector<MockRef> ops;
  for (int i = 0; i < 10; ++i) {
    ops.push_back(mock(std::chrono::milliseconds(10 + i * 10)));
    purgatory.try_complete_else_watch(ops.back(), {i, i + 1, 100});
  }
  manual->advance(30ms);  // the first three expire
  purgatory.shutdown();
  for (int i = 0; i < 10; ++i) {
    CAPTURE(i);
    CHECK(ops[static_cast<std::size_t>(i)]->completions == 1);
    if (i < 3) {
      CHECK(ops[static_cast<std::size_t>(i)]->outcome() == Outcome::expired);
      CHECK(ops[static_cast<std::size_t>(i)]->expirations == 1);
    } else {
      CHECK(ops[static_cast<std::size_t>(i)]->outcome() == Outcome::shut_down);
      CHECK(ops[static_cast<std::size_t>(i)]->expirations == 0);
    }
  }
  CHECK(purgatory.watched() == 0);
  CHECK(purgatory.num_delayed() == 0);
  CHECK(manual->timer.size() == 0);
  const auto m = purgatory.metrics();
  CHECK(m.expired_total == 3);
  CHECK(m.shut_down_total == 7);
  CHECK(purgatory.is_shut_down());
  CHECK_THROWS_AS(purgatory.try_complete_else_watch(mock(1s), {1}), PurgatoryShutDown);
  CHECK_THROWS_AS(purgatory.check_and_complete(1), PurgatoryShutDown);
  CHECK_THROWS_AS(purgatory.cancel_for_key(1), PurgatoryShutDown);
  purgatory.shutdown();  // idempotent
  manual->advance(1s);
  for (const auto& op : ops)
    CHECK(op->completions == 1);
}

TEST_CASE("a purgatory with its own timer shuts it down with itself") {
  PurgatoryOptions options;
  options.name = "owned";
  auto op = mock(100000ms);
  {
    DelayedOperationPurgatory<std::string> purgatory(options);
    CHECK(purgatory.timer().name() == "owned");
    purgatory.try_complete_else_watch(op, {"a"});
  }  // destructor: shutdown()
  CHECK(op->outcome() == Outcome::shut_down);
  CHECK(op->completions == 1);
}

TEST_CASE("on_complete may call back into the purgatory (no lock of the operation is held)") {
  ManualPurgatory<int> p;
  auto second = mock(1s);
  p.purgatory.try_complete_else_watch(second, {2});
  std::size_t nested = 0;
  auto first = make_operation(
      1s, [] { return true; },
      [&] {
        second->completable = true;
        nested = p.purgatory.check_and_complete(2);
        // A new operation watched from a callback.
        p.purgatory.try_complete_else_watch(mock(1s), {3});
      });
  p.purgatory.try_complete_else_watch(first, {1});
  CHECK(nested == 1);
  CHECK(second->completions == 1);
  CHECK(p.purgatory.num_delayed() == 1);
}

TEST_CASE("try_complete may check a key that watches its own operation without deadlock") {
  ManualPurgatory<int> p;
  DelayedOperationPurgatory<int>* purgatory = &p.purgatory;
  int calls = 0;
  auto op = make_operation(
      1s,
      [&] {
        if (++calls == 2) purgatory->check_and_complete(7);  // re-enters our own key
        return calls >= 3;
      },
      [] {});
  // The nested check cannot run try_complete() re-entrantly: it leaves a note, and the running
  // try re-checks on its way out (the third call), which completes it.
  CHECK(p.purgatory.try_complete_else_watch(op, {7}));
  CHECK(calls == 3);
  CHECK(p.purgatory.watched() == 0);
}

TEST_CASE("callback exceptions go to on_callback_error with the callback's name") {
  PurgatoryOptions options;
  std::vector<std::string> errors;
  options.on_callback_error = [&](const DelayedOperation&, std::exception_ptr e,
                                  std::string_view where) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      errors.push_back(std::string(where) + ": " + ex.what());
    }
  };
  ManualPurgatory<int> p(options);
  auto op = make_operation(
      10ms, [] { return false; }, [] { throw std::runtime_error("boom"); },
      [] { throw std::runtime_error("late"); });
  p.purgatory.try_complete_else_watch(op, {1});
  CHECK_NOTHROW(p.advance(10ms));
  REQUIRE(errors.size() == 2);
  CHECK(errors[0] == "on_complete: boom");
  CHECK(errors[1] == "on_expiration: late");
  CHECK(op->outcome() == Outcome::expired);
}

TEST_CASE("a timeout the timer refuses (max_pending 1) expires the operation at once") {
  ManualTimer manual(1ms, 20, /*max_pending=*/1);
  DelayedOperationPurgatory<int> purgatory(manual.shared);
  auto a = mock(1s);
  auto b = mock(1s);
  CHECK_FALSE(purgatory.try_complete_else_watch(a, {1}));
  CHECK_FALSE(purgatory.try_complete_else_watch(b, {1}));
  CHECK_FALSE(a->is_completed());
  CHECK(b->outcome() == Outcome::expired);
  CHECK(b->expirations == 1);
  CHECK(purgatory.num_delayed() == 1);
  CHECK(purgatory.watched() == 1);
}

TEST_CASE(
    "timeout_slack: an operation expires no earlier than its timeout and at most that fraction of "
    "it later, and a fraction outside [0, 1] is refused, naming it") {
  ManualTimer manual;
  PurgatoryOptions options;
  options.timeout_slack = 0.125;
  DelayedOperationPurgatory<int> purgatory(manual.shared, options);
  manual.advance(3ms);
  auto op = mock(1000ms);  // watched at 3 ms: due at 1003 ms, at most 125 ms late
  auto exact = mock(1000ms);
  CHECK_FALSE(purgatory.try_complete_else_watch(op, {1}));
  DelayedOperationPurgatory<int> exact_purgatory(manual.shared);  // the default: no slack
  CHECK_FALSE(exact_purgatory.try_complete_else_watch(exact, {1}));
  int at = 0;
  while (!op->is_completed() && at < 2000) {
    manual.advance(1ms);
    at = static_cast<int>(manual.clock.now() / 1ms);
    if (at == 1003) CHECK(exact->outcome() == Outcome::expired);
  }
  CHECK(op->outcome() == Outcome::expired);
  CHECK(op->expirations == 1);
  CHECK(at >= 1003);
  CHECK(at <= 1003 + 125);
  CHECK(at == 1020);  // rounded to the coarsest level tick within half of 125 ms: 20 ms

  for (const double bad : {-0.1, 1.5}) {
    PurgatoryOptions o;
    o.timeout_slack = bad;
    CHECK_THROWS_WITH_AS(DelayedOperationPurgatory<int>(manual.shared, o),
                         doctest::Contains("timeout_slack"), std::invalid_argument);
  }
}

TEST_CASE("metrics: totals and waiting time per purgatory name") {
  PurgatoryOptions options;
  options.name = "Produce";
  ManualPurgatory<int> p(options);
  auto fast = mock(100ms);
  auto slow = mock(100ms);
  p.purgatory.try_complete_else_watch(fast, {1});
  p.purgatory.try_complete_else_watch(slow, {2});
  p.advance(10ms);
  fast->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  p.advance(90ms);
  const auto m = p.purgatory.metrics();
  CHECK(m.name == "Produce");
  CHECK(m.completed_total == 1);
  CHECK(m.expired_total == 1);
  CHECK(m.waited.count == 2);
  CHECK(m.waited.p50 >= 10ms);
  CHECK(m.waited.p50 <= 12ms);
  CHECK(m.waited.max == 100ms);
  CHECK(m.watched == 0);
  CHECK(m.delayed == 0);
}

}  // namespace
}  // namespace purgatory::test

TEST_CASE("purgatory: a timeout above the timer's maximum is refused before anything is watched") {
  purgatory::test::ManualPurgatory<int> p;
  auto op = purgatory::make_operation(
      purgatory::SystemTimer::kMaxDelay + std::chrono::hours(1), [] { return false; }, [] {});
  CHECK_THROWS_WITH_AS(p.purgatory.try_complete_else_watch(op, {1}),
                       doctest::Contains("exceeds SystemTimer::kMaxDelay"), std::invalid_argument);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK_FALSE(op->is_completed());
}
