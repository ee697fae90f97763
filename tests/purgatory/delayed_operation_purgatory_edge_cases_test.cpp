// DelayedOperationPurgatory promises that once did not hold (the longest timeout, refused and
// failed watches, shutdown() and its callbacks, cancel_for_key(), re-entrant checks, a key listed
// twice): each test fails with its fix reverted.
#include "purgatory/delayed_operation_purgatory.hpp"

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "contract_support.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "regression: a timeout of SystemTimer::kMaxDelay is accepted while the timer's "
    "wheel lags the clock") {
  ManualPurgatory<int> p;
  auto keep_busy = mock(1h);
  p.purgatory.try_complete_else_watch(keep_busy, {0});  // the wheel no longer catches up for free
  p.manual.clock.advance(5ms);                          // time moves, nothing expires
  auto op = mock(SystemTimer::kMaxDelay);
  CHECK_NOTHROW(p.purgatory.try_complete_else_watch(op, {1, 2}));
  CHECK(op->was_watched());
  CHECK(p.purgatory.watched() == 3);
  CHECK(p.purgatory.num_delayed() == 2);
  CHECK(timeout_pending(*op));  // its timeout is scheduled
  p.purgatory.shutdown();
  CHECK(op->outcome() == Outcome::shut_down);
}

TEST_CASE(
    "regression: an exception from the timer after the keys were linked leaves "
    "nothing behind, and a retry after it is sound (no use-after-free)") {
  ManualPurgatory<int> p;
  // The operation is a TimerTask already pending in another timer: the purgatory's add_at()
  // throws std::invalid_argument after linking its keys.
  ManualTimer other;
  auto op = mock(1s);
  other.timer.add(timeout_task(*op), 1h);
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(op, {1, 2, 3}), std::invalid_argument);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK_FALSE(op->was_watched());
  CHECK(op->outcome() == Outcome::pending);
  CHECK(op->completions == 0);
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 0);  // not watched: checks do not reach it
  CHECK(op->completions == 0);
  op->completable = false;
  // The caller still owns it: free it from the other timer and retry.
  CHECK(cancel_timeout(*op));
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1, 2, 3}));
  CHECK(p.purgatory.watched() == 3);
  CHECK(op->force_complete());
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.check_and_complete(1) == 0);  // ASan: nothing freed is reachable
  CHECK(op->completions == 1);
}

TEST_CASE(
    "regression: shutdown() called from an operation's own callback does not wait "
    "for itself") {
  ManualPurgatory<int> p;
  auto other = mock(1s);
  p.purgatory.try_complete_else_watch(other, {2});
  bool returned = false;
  auto op = make_operation(
      1s, [] { return false; },
      [&] {
        p.purgatory.shutdown();  // its own finish is under way on this thread
        returned = true;
      });
  p.purgatory.try_complete_else_watch(op, {1});
  CHECK(op->force_complete());
  CHECK(returned);
  CHECK(p.purgatory.is_shut_down());
  CHECK(other->outcome() == Outcome::shut_down);
  CHECK(other->completions == 1);
}

// try_complete() checks a key that watches the operation itself.
class SelfChecking final : public DelayedOperation {
 public:
  SelfChecking(DelayedOperationPurgatory<int>& p, int key)
      : DelayedOperation(1s), p_(p), key_(key) {}
  std::atomic<int> tries{0};

 protected:
  bool try_complete() override {
    if (tries.fetch_add(1) > 1000) return force_complete();  // the bug: break the loop, fail
    (void)p_.check_and_complete(key_);
    return false;
  }
  void on_complete() override {}

 private:
  DelayedOperationPurgatory<int>& p_;
  int key_;
};

TEST_CASE(
    "regression: a try_complete() that checks a key watching its own operation "
    "runs a bounded number of times") {
  ManualPurgatory<int> p;
  purgatory::Ref<SelfChecking> op(new SelfChecking(p.purgatory, 1));
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1}));
  // The watch tries twice (before and after linking); each try may be re-run once for the
  // check it made of its own key.
  CHECK(op->tries <= 4);
  CHECK(timeout_pending(*op));
  const int before = op->tries;
  CHECK(p.purgatory.check_and_complete(1) == 0);
  CHECK(op->tries - before <= 2);
}

TEST_CASE(
    "regression: two operations whose try_complete() checks the other's key run a "
    "bounded number of times") {
  ManualPurgatory<int> p;
  purgatory::Ref<SelfChecking> a(new SelfChecking(p.purgatory, 2));
  purgatory::Ref<SelfChecking> b(new SelfChecking(p.purgatory, 1));
  p.purgatory.try_complete_else_watch(a, {1});
  p.purgatory.try_complete_else_watch(b, {2});
  a->tries = 0;
  b->tries = 0;
  CHECK(p.purgatory.check_and_complete(1) == 0);
  CHECK(a->tries <= 4);
  CHECK(b->tries <= 4);
  CHECK(timeout_pending(*a));
  CHECK(timeout_pending(*b));
}

TEST_CASE("regression: a key listed twice in one watch is watched once") {
  ManualPurgatory<int> p;
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {7, 7, 8, 7});
  CHECK(p.purgatory.watched() == 2);
  CHECK(p.purgatory.num_delayed() == 1);
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(7) == 1);
  CHECK(op->completions == 1);
  CHECK(op->tries == 3);  // before the watch, after it, and the one check
  CHECK(p.purgatory.watched() == 0);
}

}  // namespace
}  // namespace purgatory::test
