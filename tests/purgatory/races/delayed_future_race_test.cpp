// purgatory/delayed_future.hpp: the last futures completed on two threads at once, on the hooked
// libraries at their named race points.
#include "purgatory/delayed_future.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "contract_support.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "delayed_future.hpp: the last two futures completed on two threads at once: when one thread's "
    "check holds the operation and the other's finds it busy, the operation still completes, "
    "once") {
  // Thread A (this one) completes future a; its check sees b not done. Meanwhile thread B
  // completes b, and its check finds the lock busy; A then finishes entirely before B leaves its
  // note. B must serve it itself.
  ManualTimer manual;
  DelayedFuturePurgatory<int> purgatory(manual.timer);
  Promise<int> a;
  Promise<int> b;
  Response response;
  auto op =
      purgatory.try_complete_else_watch(1s, {a.get_future(), b.get_future()}, response.callback());
  Signal b_busy;
  Signal a_done;
  std::thread b_thread;
  std::thread::id b_id;
  bool first_try = true;
  bool first_busy = true;
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedFuture::try_complete: a future not done",
                                      [&] {
                                        if (!std::exchange(first_try, false)) return;
                                        b_thread = std::thread([&] {
                                          b_id = std::this_thread::get_id();
                                          b.set_value(2);
                                        });
                                        CHECK(b_busy.wait());
                                      }},
                                     {"DelayedOperation::check: lock busy", [&] {
                                        if (!std::exchange(first_busy, false)) return;
                                        b_busy.set();
                                        CHECK(a_done.wait());
                                      }}}});
  a.set_value(1);
  a_done.set();
  b_thread.join();
  CHECK(response.calls == 1);
  CHECK(response.outcome.load() == Outcome::completed);
  CHECK(response.thread == b_id);
  CHECK(purgatory.num_delayed() == 0);
}

TEST_CASE(
    "delayed_future.hpp: thread-safe: the last two futures completed on two threads at once, "
    "with watches from two threads, complete each operation exactly once (seeded schedule)") {
  const int n = rounds(150, 30);
  std::uint64_t link_hits = 0;
  for_each_seed(n, [&](std::uint64_t seed) {
    ManualTimer manual;
    DelayedFuturePurgatory<int> purgatory(manual.timer);
    constexpr int kOps = 4;
    std::vector<Promise<int>> left(kOps);
    std::vector<Promise<int>> right(kOps);
    std::vector<Response> responses(kOps);
    std::vector<purgatory::Ref<DelayedFuture<int>>> ops(kOps);
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 30us});
    auto watch = [&](int i) {
      const auto k = static_cast<std::size_t>(i);
      ops[k] = purgatory.try_complete_else_watch(1s, {left[k].get_future(), right[k].get_future()},
                                                 responses[k].callback());
    };
    std::thread w1([&] {
      for (int i = 0; i < kOps; i += 2)
        watch(i);
    });
    std::thread w2([&] {
      for (int i = 1; i < kOps; i += 2)
        watch(i);
    });
    std::thread a([&] {
      for (auto& p : left)
        p.set_value(1);
    });
    std::thread b([&] {
      for (auto& p : right)
        p.set_value(2);
    });
    w1.join();
    w2.join();
    a.join();
    b.join();
    for (int i = 0; i < kOps; ++i) {
      const auto& r = responses[static_cast<std::size_t>(i)];
      CHECK(r.calls == 1);
      CHECK(r.outcome.load() == Outcome::completed);
    }
    CHECK(purgatory.num_delayed() == 0);
    link_hits += schedule.hits("DelayedFuture: took the operation");
  });
  CHECK(link_hits > 0);
}

}  // namespace
}  // namespace purgatory::test
