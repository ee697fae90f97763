// Stress: adders, checkers and force-completers race the timer's reaper. Invariant: every
// operation gets exactly one outcome, and on_complete ran exactly once per operation (counted).
#include "purgatory/delayed_operation_purgatory.hpp"

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

class CountedOperation final : public DelayedOperation {
 public:
  // Completable from the (needed_tries + 1)-th try: the two tries of try_complete_else_watch,
  // then checks of its keys.
  CountedOperation(Nanos timeout, int needed_tries, std::atomic<int>& on_complete_calls)
      : DelayedOperation(timeout), needed_tries_(needed_tries), total_(on_complete_calls) {}
  std::atomic<int> completions{0};
  std::atomic<int> expirations{0};

 protected:
  bool try_complete() override { return ++tries_ > needed_tries_ && force_complete(); }
  void on_complete() override {
    completions.fetch_add(1);
    total_.fetch_add(1);
  }
  void on_expiration() override { expirations.fetch_add(1); }

 private:
  const int needed_tries_;
  int tries_ = 0;  // guarded by the operation's lock (try_complete runs under it)
  std::atomic<int>& total_;
};

TEST_CASE("stress: add / check / force-complete / expire race - exactly one outcome each") {
  constexpr int kAdders = 2;
  constexpr int kOpsPerAdder = 4000;
  constexpr int kKeys = 64;
  constexpr int kTotal = kAdders * kOpsPerAdder;

  PurgatoryOptions options;
  options.name = "stress";
  options.shards = 8;
  DelayedOperationPurgatory<int> purgatory(options);
  std::atomic<int> on_complete_calls{0};
  std::vector<purgatory::Ref<CountedOperation>> ops(kTotal);
  std::atomic<bool> adding{true};

  std::vector<std::thread> threads;
  for (int a = 0; a < kAdders; ++a) {
    threads.emplace_back([&, a] {
      std::minstd_rand rng(static_cast<unsigned>(a + 1));
      for (int i = 0; i < kOpsPerAdder; ++i) {
        const int index = a * kOpsPerAdder + i;
        // 0..4 ms timeouts: a good share expires while the others race to complete them.
        auto op = purgatory::Ref<CountedOperation>(
            new CountedOperation(std::chrono::microseconds(rng() % 5000),
                                 static_cast<int>(rng() % 6), on_complete_calls));
        ops[static_cast<std::size_t>(index)] = op;
        const int k = static_cast<int>(rng() % kKeys);
        purgatory.try_complete_else_watch(op, {k, (k + 1) % kKeys, (k + 7) % kKeys});
      }
    });
  }
  threads.emplace_back([&] {  // checker
    std::minstd_rand rng(99);
    while (adding.load()) {
      purgatory.check_and_complete(static_cast<int>(rng() % kKeys));
      std::this_thread::yield();
    }
  });
  threads.emplace_back([&] {  // force-completer of whatever a key holds
    std::minstd_rand rng(7);
    while (adding.load()) {
      for (auto& op : purgatory.cancel_for_key(static_cast<int>(rng() % kKeys))) {
        // Cancelled operations are handed back: give them their outcome ourselves.
        op->force_complete();
      }
      std::this_thread::sleep_for(100us);
    }
  });
  threads[0].join();
  threads[1].join();
  adding = false;
  threads[2].join();
  threads[3].join();

  // Everything still waiting expires within its <= 5 ms timeout (generous bound: 30 s).
  REQUIRE(eventually([&] { return purgatory.num_delayed() == 0; }, 30s));
  REQUIRE(eventually([&] { return on_complete_calls.load() == kTotal; }, 30s));
  int completed = 0;
  int expired = 0;
  for (const auto& op : ops) {
    REQUIRE(op);
    CHECK(op->is_completed());
    CHECK(op->completions == 1);
    if (op->outcome() == Outcome::expired) {
      ++expired;
      CHECK(op->expirations == 1);
    } else {
      ++completed;
      CHECK(op->expirations == 0);
    }
  }
  CHECK(completed + expired == kTotal);
  CHECK(purgatory.watched() == 0);
  const auto m = purgatory.metrics();
  CHECK(m.expired_total == static_cast<std::uint64_t>(expired));
  // Completions: through checks or first tries (counted), or force-completed after cancel.
  CHECK(m.completed_total + m.cancelled_total == static_cast<std::uint64_t>(completed));
  MESSAGE("completed ", completed, ", expired ", expired, ", cancelled then forced ",
          m.cancelled_total);
}

}  // namespace
}  // namespace purgatory::test
