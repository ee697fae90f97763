#include "purgatory/delayed_future.hpp"

#include <stdexcept>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

TEST_CASE("delayed future: completes when all 3 futures are done - on the last one's thread") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  std::vector<Promise<int>> promises(3);
  std::vector<SharedFuture<int>> futures;
  for (auto& p : promises)
    futures.push_back(p.get_future());
  int sum = -1;
  Outcome seen = Outcome::pending;
  auto op = purgatory.try_complete_else_watch(
      100ms, futures, [&](const std::vector<SharedFuture<int>>& done, Outcome o) {
        seen = o;
        sum = 0;
        for (const auto& f : done)
          sum += f.get();
      });
  CHECK_FALSE(op->is_completed());
  promises[0].set_value(1);
  promises[2].set_value(3);
  CHECK_FALSE(op->is_completed());
  CHECK(purgatory.num_delayed() == 1);
  promises[1].set_value(2);
  CHECK(seen == Outcome::completed);
  CHECK(sum == 6);
  CHECK(purgatory.num_delayed() == 0);
  CHECK(manual.timer.size() == 0);
}

TEST_CASE("delayed future: expires after 100 ms if one future never completes") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> done;
  Promise<int> never;
  done.set_value(1);
  Outcome seen = Outcome::pending;
  auto op = purgatory.try_complete_else_watch(
      100ms, {done.get_future(), never.get_future()},
      [&](const std::vector<SharedFuture<int>>&, Outcome o) { seen = o; });
  manual.advance(99ms);
  CHECK(seen == Outcome::pending);
  manual.advance(1ms);
  CHECK(seen == Outcome::expired);
  never.set_value(2);  // too late: nothing happens, nothing dangles
  CHECK(op->outcome() == Outcome::expired);
}

TEST_CASE("delayed future: futures already done complete it at once and errors are delivered") {
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> ok;
  Promise<int> failed;
  ok.set_value(1);
  failed.set_exception(std::make_exception_ptr(std::runtime_error("no leader")));
  bool threw = false;
  auto op =
      purgatory.try_complete_else_watch(1s, {ok.get_future(), failed.get_future()},
                                        [&](const std::vector<SharedFuture<int>>& fs, Outcome) {
                                          CHECK_THROWS_AS((void)fs[1].get(), std::runtime_error);
                                          threw = true;
                                        });
  CHECK(op->is_completed());
  CHECK(threw);
  CHECK_THROWS_AS(ok.set_value(2), std::logic_error);
}

}  // namespace
}  // namespace purgatory::test
