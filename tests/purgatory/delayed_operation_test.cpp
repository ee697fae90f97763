#include "purgatory/delayed_operation.hpp"
#include "purgatory/detail/operation_access.hpp"

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

struct RecordingListener final : detail::OutcomeListener {
  explicit RecordingListener(std::atomic<int>& calls, Outcome& seen) : calls_(calls), seen_(seen) {}
  void on_outcome(Outcome outcome) noexcept override {
    seen_ = outcome;
    calls_.fetch_add(1);
  }
  std::atomic<int>& calls_;
  Outcome& seen_;
};

TEST_CASE("force_complete: exactly one of 8 racing threads wins and on_complete runs once") {
  for (int round = 0; round < 50; ++round) {
    auto op = mock(1000ms);
    std::atomic<int> wins{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        while (!go.load())
          std::this_thread::yield();
        if (op->force_complete()) wins.fetch_add(1);
      });
    }
    go = true;
    for (auto& t : threads)
      t.join();
    CHECK(wins == 1);
    CHECK(op->completions == 1);
    CHECK(op->expirations == 0);
    CHECK(op->outcome() == Outcome::completed);
  }
}

TEST_CASE("make_operation: callables without a subclass - on_complete may take the Outcome") {
  bool ready = false;
  Outcome seen = Outcome::pending;
  int expirations = 0;
  auto op = make_operation(
      5ms, [&] { return ready; }, [&](Outcome o) { seen = o; }, [&] { ++expirations; });
  CHECK_FALSE(op->safe_try_complete());
  ready = true;
  CHECK(op->safe_try_complete());
  CHECK(seen == Outcome::completed);
  CHECK(expirations == 0);
  CHECK_FALSE(op->force_complete());
  CHECK_FALSE(op->safe_try_complete());

  int plain = 0;
  auto op2 = make_operation(
      5ms, [] { return false; }, [&] { ++plain; });
  CHECK(op2->force_complete());
  CHECK(plain == 1);
}

TEST_CASE("force_complete inside try_complete: on_complete runs after try_complete returns") {
  class Inner : public DelayedOperation {
   public:
    Inner() : DelayedOperation(1s) {}
    bool returned_before_complete = false;
    bool in_try = false;

   protected:
    bool try_complete() override {
      in_try = true;
      const bool won = force_complete();
      in_try = false;
      return won;
    }
    void on_complete() override { returned_before_complete = !in_try; }
  };
  purgatory::Ref<Inner> op(new Inner);
  CHECK(op->safe_try_complete());
  CHECK(op->returned_before_complete);
}

TEST_CASE("outcome listener: called once after the callbacks or at once if already done") {
  std::atomic<int> calls{0};
  Outcome seen = Outcome::pending;
  auto op = mock(1s);
  detail::OperationAccess::listen(*op, std::make_unique<RecordingListener>(calls, seen));
  CHECK(calls == 0);
  op->force_complete();
  CHECK(calls == 1);
  CHECK(seen == Outcome::completed);
  CHECK_THROWS_AS(
      detail::OperationAccess::listen(*op, std::make_unique<RecordingListener>(calls, seen)),
      std::logic_error);

  std::atomic<int> late_calls{0};
  Outcome late = Outcome::pending;
  auto done = mock(1s);
  done->force_complete();
  detail::OperationAccess::listen(*done, std::make_unique<RecordingListener>(late_calls, late));
  CHECK(late_calls == 1);
  CHECK(late == Outcome::completed);
}

TEST_CASE(
    "a throwing callback is reported and never propagated - try_complete throwing = not done") {
  auto op = make_operation(
      1s, []() -> bool { throw std::runtime_error("condition failed"); },
      [] { throw std::runtime_error("on_complete failed"); });
  CHECK_NOTHROW(CHECK_FALSE(op->safe_try_complete()));
  CHECK_NOTHROW(CHECK(op->force_complete()));
  CHECK(op->is_completed());
}

}  // namespace
}  // namespace purgatory::test
