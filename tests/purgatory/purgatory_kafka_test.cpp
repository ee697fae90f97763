// Kafka's DelayedOperationTest, with its numbers, on a manual clock where time matters.
#include "purgatory/delayed_operation_purgatory.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

TEST_CASE("request satisfaction: 100000 ms operations complete only when their key is checked") {
  ManualPurgatory<std::string> p;
  auto r1 = mock(100000ms);
  auto r2 = mock(100000ms);
  CHECK(p.purgatory.check_and_complete("test1") == 0);
  CHECK_FALSE(p.purgatory.try_complete_else_watch(r1, {"test1"}));
  CHECK(p.purgatory.check_and_complete("test1") == 0);
  CHECK_FALSE(p.purgatory.try_complete_else_watch(r2, {"test2"}));
  CHECK(p.purgatory.check_and_complete("test2") == 0);
  r1->completable = true;
  CHECK(p.purgatory.check_and_complete("test1") == 1);
  CHECK(p.purgatory.check_and_complete("test1") == 0);
  r2->completable = true;
  CHECK(p.purgatory.check_and_complete("test2") == 1);
  CHECK(p.purgatory.check_and_complete("test2") == 0);
  CHECK(r1->completions == 1);
  CHECK(r2->completions == 1);
  CHECK(r1->outcome() == Outcome::completed);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.purgatory.watched() == 0);
}

TEST_CASE("request expiry: 20 ms expires at 20 ms and not before - 200000 ms does not") {
  ManualPurgatory<std::string> p;
  auto r1 = mock(20ms);
  auto r2 = mock(200000ms);
  CHECK_FALSE(p.purgatory.try_complete_else_watch(r1, {"test1"}));
  CHECK_FALSE(p.purgatory.try_complete_else_watch(r2, {"test2"}));
  p.advance(19ms);
  CHECK_FALSE(r1->is_completed());
  p.advance(1ms);
  CHECK(r1->is_completed());
  CHECK(r1->outcome() == Outcome::expired);
  CHECK(r1->completions == 1);
  CHECK(r1->expirations == 1);
  CHECK_FALSE(r2->is_completed());
  CHECK(r2->expirations == 0);
  CHECK(p.purgatory.num_delayed() == 1);
  CHECK(p.purgatory.watched() == 1);
  CHECK(p.purgatory.metrics().expired_total == 1);
}

TEST_CASE("request expiry on real time: 20 ms expires after at least 20 ms") {
  PurgatoryOptions options;
  options.name = "real-time";
  DelayedOperationPurgatory<std::string> purgatory(options);
  auto r1 = mock(20ms);
  auto r2 = mock(200000ms);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(purgatory.try_complete_else_watch(r1, {"test1"}));
  CHECK_FALSE(purgatory.try_complete_else_watch(r2, {"test2"}));
  REQUIRE(eventually([&] { return r1->expirations.load() == 1; }));
  CHECK(std::chrono::steady_clock::now() - start >= 20ms);
  CHECK(r1->completions == 1);
  CHECK_FALSE(r2->is_completed());
}

TEST_CASE(
    "purge: operations on keys 1 / 1+2 / 1+2+3 give delayed 3 and watched 6 and leave at once") {
  ManualPurgatory<std::string> p;
  auto r1 = mock(100000ms);
  auto r2 = mock(100000ms);
  auto r3 = mock(100000ms);
  p.purgatory.try_complete_else_watch(r1, {"test1"});
  p.purgatory.try_complete_else_watch(r2, {"test1", "test2"});
  p.purgatory.try_complete_else_watch(r3, {"test1", "test2", "test3"});
  CHECK(p.purgatory.num_delayed() == 3);
  CHECK(p.purgatory.watched() == 6);

  // Kafka keeps completed operations watched until a check or purge; here they leave at once.
  r2->completable = true;
  CHECK(r2->safe_try_complete());
  CHECK(p.purgatory.num_delayed() == 2);
  CHECK(p.purgatory.watched() == 4);
  r3->completable = true;
  CHECK(r3->safe_try_complete());
  CHECK(p.purgatory.num_delayed() == 1);
  CHECK(p.purgatory.watched() == 1);

  CHECK(p.purgatory.check_and_complete("test1") == 0);
  CHECK(p.purgatory.watched() == 1);
  r1->completable = true;
  CHECK(p.purgatory.check_and_complete("test1") == 1);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.manual.timer.size() == 0);  // completed operations left the wheel too
}

TEST_CASE("cancel_for_key on a key with 2 operations returns 2 and leaves the others") {
  ManualPurgatory<std::string> p;
  auto r1 = mock(100000ms);
  auto r2 = mock(100000ms);
  auto r3 = mock(100000ms);
  p.purgatory.try_complete_else_watch(r1, {"key"});
  p.purgatory.try_complete_else_watch(r2, {"key"});
  p.purgatory.try_complete_else_watch(r3, {"key2"});
  const auto cancelled = p.purgatory.cancel_for_key("key");
  CHECK(cancelled.size() == 2);
  CHECK(p.purgatory.num_delayed() == 1);
  CHECK(p.purgatory.watched() == 1);
  CHECK(p.purgatory.cancel_for_key("key").empty());
  CHECK(p.manual.timer.size() == 1);  // their timeouts were cancelled
  for (const auto& op : cancelled)
    CHECK_FALSE(op->is_completed());
  CHECK(p.purgatory.metrics().cancelled_total == 2);
}

TEST_CASE("20 threads complete 100 operations with random 0..9 ms delays - each exactly once") {
  constexpr int kThreads = 20;
  constexpr int kOps = 100;
  constexpr int kAttempts = 20;
  constexpr int kMaxDelayMs = 10;

  // Sleeps in try_complete() like Kafka's test, so checks often find the lock held.
  class SlowOperation : public MockOperation {
   public:
    SlowOperation(int index, unsigned seed)
        : MockOperation(10000ms), key("key" + std::to_string(index)), rng_(seed) {}
    const std::string key;
    std::atomic<int> attempts_remaining{kAttempts};

   protected:
    bool try_complete() override {
      const bool should_complete = completable.load();
      std::this_thread::sleep_for(std::chrono::milliseconds(rng_() % kMaxDelayMs));
      return should_complete && force_complete();
    }

   private:
    std::minstd_rand rng_;  // used under the operation's lock only
  };

  PurgatoryOptions options;
  options.name = "multi-thread";
  DelayedOperationPurgatory<std::string> purgatory(options);
  std::mt19937 rng(42);
  std::vector<purgatory::Ref<SlowOperation>> ops;
  for (int i = 0; i < kOps; ++i) {
    ops.emplace_back(new SlowOperation(i, static_cast<unsigned>(rng())));
    purgatory.try_complete_else_watch(ops.back(), {ops.back()->key});
  }
  struct Attempt {
    int delay_ms;
    SlowOperation* op;
  };
  std::vector<Attempt> attempts;
  for (int a = 0; a < kAttempts; ++a) {
    for (auto& op : ops) {
      attempts.push_back({static_cast<int>(rng() % kMaxDelayMs), op.get()});
    }
  }
  std::stable_sort(attempts.begin(), attempts.end(),
                   [](const Attempt& x, const Attempt& y) { return x.delay_ms < y.delay_ms; });
  std::atomic<std::size_t> next{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < attempts.size(); i = next++) {
        std::this_thread::sleep_until(start + std::chrono::milliseconds(attempts[i].delay_ms));
        SlowOperation& op = *attempts[i].op;
        if (op.attempts_remaining.fetch_sub(1) == 1) op.completable = true;
        purgatory.check_and_complete(op.key);
      }
    });
  }
  for (auto& t : pool)
    t.join();
  for (auto& op : ops) {
    CHECK(op->is_completed());
    CHECK(op->completions == 1);
    CHECK(op->expirations == 0);
  }
  CHECK(purgatory.num_delayed() == 0);
  CHECK(purgatory.watched() == 0);
}

TEST_CASE("the operation's lock is held while try_complete runs and checks never block on it") {
  ManualPurgatory<std::string> p;
  const std::string key = "key";
  auto watch = [&](int count) {
    std::vector<MockRef> ops;
    for (int i = 0; i < count; ++i) {
      ops.push_back(mock(100000ms));
      CHECK_FALSE(p.purgatory.try_complete_else_watch(ops.back(), {key}));
    }
    return ops;
  };
  auto set_completable = [](const std::vector<MockRef>& ops) {
    for (const auto& op : ops)
      op->completable = true;
  };

  SUBCASE("free locks: every completable operation completes with try_complete under the lock") {
    auto ops = watch(2);
    set_completable(ops);
    CHECK(p.purgatory.check_and_complete(key) == 2);
    for (const auto& op : ops) {
      CHECK(op->lock_held_in_try);
      CHECK(op->tries >= 2);  // the try inside try_complete_else_watch ran locked too
      CHECK_FALSE(op->lock_held_in_complete);  // on_complete runs with the lock released
    }
  }
  SUBCASE("lock held by the checking thread: both complete and callbacks run on its unlock") {
    auto ops = watch(2);
    set_completable(ops);
    ops[1]->lock();
    CHECK(p.purgatory.check_and_complete(key) == 2);
    CHECK(ops[0]->completions == 1);
    CHECK(ops[1]->is_completed());
    CHECK(ops[1]->completions == 0);
    ops[1]->unlock();
    CHECK(ops[1]->completions == 1);
  }
  SUBCASE("lock held by another thread: the check does not block and the holder re-checks") {
    auto ops = watch(2);
    set_completable(ops);
    std::atomic<int> stage{0};
    std::thread holder([&] {
      ops[0]->lock();
      stage = 1;
      while (stage.load() != 2)
        std::this_thread::yield();
      ops[0]->unlock();  // finds the note left by the skipped check and completes it
    });
    while (stage.load() != 1)
      std::this_thread::yield();
    CHECK(p.purgatory.check_and_complete(key) == 1);
    CHECK(ops[1]->is_completed());
    CHECK_FALSE(ops[0]->is_completed());
    stage = 2;
    holder.join();
    CHECK(ops[0]->is_completed());
    CHECK(ops[0]->completions == 1);
    CHECK(p.purgatory.check_and_complete(key) == 0);
  }
  SUBCASE("immediately completable operations complete without being watched") {
    for (int i = 0; i < 2; ++i) {
      auto op = mock(100000ms);
      op->completable = true;
      CHECK(p.purgatory.try_complete_else_watch(op, {key}));
      CHECK(op->is_completed());
      CHECK(op->lock_held_in_try);
    }
    CHECK(p.purgatory.watched() == 0);
    CHECK(p.manual.timer.size() == 0);
  }
}

}  // namespace
}  // namespace purgatory::test
