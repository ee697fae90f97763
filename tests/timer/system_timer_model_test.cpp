// A randomized model test: 1,000,000 random add / cancel / re-add / advance steps on a manual
// clock, checked against a reference that is obviously right (an ordered multimap of deadlines).
//
// Invariant checked after every step: the tasks that ran are exactly those whose deadline,
// rounded up to the tick, the clock has reached; each ran once, at the first advance that
// reached it (so within one tick of its deadline), never before its deadline, in deadline
// order; none ran inside add() (one added when already due runs at the next advance, first);
// cancel() returns true exactly when the model says the task was pending.
#include "purgatory/timer/system_timer.hpp"

#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include <doctest/doctest.h>

#include "thread_slot.hpp"
#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::Nanos;

namespace {

struct ModelTask : purgatory::TimerTask {
  ModelTask(int id, std::vector<std::pair<int, Nanos>>* fired, const purgatory::Clock* clock)
      : id_(id), fired_(fired), clock_(clock) {}

 protected:
  void run() override { fired_->emplace_back(id_, clock_->now()); }

 private:
  int id_;
  std::vector<std::pair<int, Nanos>>* fired_;
  const purgatory::Clock* clock_;
};

struct Model {
  std::map<int, std::pair<std::int64_t, std::int64_t>> pending;  // id -> (deadline, expiration)
  std::multimap<std::int64_t, int> by_expiration;

  void remove(int id) {
    auto it = pending.find(id);
    if (it == pending.end()) return;
    auto [lo, hi] = by_expiration.equal_range(it->second.second);
    for (auto e = lo; e != hi; ++e) {
      if (e->second == id) {
        by_expiration.erase(e);
        break;
      }
    }
    pending.erase(it);
  }
};

// `bases`: the timer's bases; each add is made as if from a random thread (its slot picks the
// base), so idle tasks re-added land in another base than before, while a pending task re-added
// moves within its own.
// The expiration add(task, delay, slack) promises (system_timer.hpp): the tick-rounded one,
// rounded up again to the coarsest level tick (tick x wheel_size^k) not above half the slack.
std::int64_t expiration_with_slack(std::int64_t expiration, std::int64_t slack, std::int64_t tick,
                                   std::int64_t wheel_size) {
  std::int64_t grain = tick;
  while (grain * wheel_size <= slack / 2)
    grain *= wheel_size;
  return (expiration + grain - 1) / grain * grain;
}

// `concurrency`: single_thread makes the same calls on a timer that takes no lock (one base);
// none: the run's mode (test_run_mode.hpp), so that the suite's single_thread run takes every
// script through a single-thread timer.
// `slack`: 40% of the adds give a slack of up to half the delay (add(task, delay, slack)).
void run_model(std::uint64_t seed, int steps, Nanos tick, int wheel_size, std::size_t bases = 1,
               std::optional<purgatory::TimerOptions::Concurrency> concurrency = std::nullopt,
               bool slack = false) {
  purgatory::test::ManualTimer m(tick, wheel_size, 0, bases, concurrency);
  const bool single = purgatory::test::hand_driven_concurrency(concurrency) ==
                      purgatory::TimerOptions::Concurrency::single_thread;
  REQUIRE(m.timer.single_thread() == single);
  REQUIRE(m.timer.base_count() == (single ? 1 : bases));
  std::vector<std::pair<int, Nanos>> fired;
  constexpr int kTasks = 2000;
  std::vector<purgatory::Ref<ModelTask>> tasks;
  for (int i = 0; i < kTasks; ++i) {
    tasks.push_back(purgatory::make_task<ModelTask>(i, &fired, &m.clock));
  }
  Model model;
  std::map<int, std::size_t> base_of;  // the base a pending task sits in
  std::mt19937_64 rng(seed);
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const std::int64_t t = tick.count();
  std::int64_t failures = 0;
  auto fail = [&](bool ok) {
    if (!ok) ++failures;
  };

  for (int step = 0; step < steps && failures == 0; ++step) {
    const int id = static_cast<int>(uniform(0, kTasks - 1));
    const auto roll = uniform(0, 99);
    if (roll < 45) {  // add, or re-add (move) if pending
      const auto kind = uniform(0, 99);
      const std::int64_t delay = kind < 2    ? -uniform(0, 1'000'000)
                                 : kind < 60 ? uniform(1, 50'000'000)           // up to 50 ms
                                 : kind < 90 ? uniform(1, 5'000'000'000)        // up to 5 s
                                             : uniform(1, 86'400'000'000'000);  // up to a day
      const std::int64_t now = m.clock.now().count();
      const auto slot = static_cast<std::uint32_t>(uniform(0, 63));
      purgatory::detail::set_timer_thread_slot(slot);
      if (model.pending.count(id) == 0) base_of[id] = slot % m.timer.base_count();
      model.remove(id);
      const std::int64_t late =
          slack && delay > 0 && uniform(0, 99) < 40 ? uniform(0, delay / 2) : 0;
      if (late > 0) {
        m.timer.add(tasks[static_cast<std::size_t>(id)], Nanos{delay}, Nanos{late});
      } else {
        m.timer.add(tasks[static_cast<std::size_t>(id)], Nanos{delay});
      }
      fail(fired.empty());  // never inside add(), whatever the delay
      // Due already (delay <= 0): pending until the next advance, which runs it before anything
      // in the wheel (its expiration sorts first).
      const std::int64_t deadline = now + delay;
      std::int64_t expiration = delay <= 0 ? -1 : (deadline + t - 1) / t * t;
      if (late > 0) {
        expiration = expiration_with_slack(expiration, late, t, wheel_size);
        fail(expiration >= deadline && expiration <= deadline + late + t);  // the promise
      }
      model.pending[id] = {deadline, expiration};
      model.by_expiration.emplace(expiration, id);
    } else if (roll < 65) {  // cancel
      const bool was_pending = model.pending.count(id) == 1;
      fail(tasks[static_cast<std::size_t>(id)]->cancel() == was_pending);
      model.remove(id);
    } else {  // advance
      const auto kind = uniform(0, 99);
      const std::int64_t by = kind < 70   ? uniform(0, 2'000'000)
                              : kind < 97 ? uniform(0, 100'000'000)
                                          : uniform(0, 3'600'000'000'000);
      m.clock.advance(Nanos{by});
      m.driver.advance_clock(Nanos::zero());
      const std::int64_t now = m.clock.now().count();
      std::vector<std::pair<int, std::int64_t>> expected;  // (id, expiration), expiration order
      for (auto it = model.by_expiration.begin();
           it != model.by_expiration.end() && it->first <= now;) {
        expected.emplace_back(it->second, it->first);
        model.pending.erase(it->second);
        it = model.by_expiration.erase(it);
      }
      fail(fired.size() == expected.size());
      // Same set; and each base fires in bucket order, so its expirations never go down.
      std::multiset<int> got_ids, want_ids;
      std::map<std::size_t, std::int64_t> last_expiration;  // per base
      std::map<int, std::int64_t> expiration_of;
      for (const auto& [eid, exp] : expected) {
        want_ids.insert(eid);
        expiration_of[eid] = exp;
      }
      for (const auto& [fid, at] : fired) {
        got_ids.insert(fid);
        const auto exp = expiration_of.count(fid) ? expiration_of[fid] : -1;
        std::int64_t& last = last_expiration.try_emplace(base_of[fid], -1).first->second;
        fail(exp >= last);  // deadline order within a base
        last = exp;
        fail(at.count() == now);
      }
      fail(got_ids == want_ids);
      fired.clear();
    }
    fail(m.timer.size() == model.pending.size());
  }
  INFO("seed " << seed);
  CHECK(failures == 0);
  // No task still pending ran, and every pending one runs once the clock passes a day + 5 s.
  m.advance(std::chrono::hours(25));
  CHECK(fired.size() == model.pending.size());
  CHECK(m.timer.size() == 0);
}

}  // namespace

TEST_CASE("SystemTimer model: 1,000,000 random steps on tick 1 ms, 20 slots match the reference") {
  run_model(20261130, 1'000'000, 1ms, 20);
}

TEST_CASE("SystemTimer model: 200,000 random steps on tick 3 ms, 7 slots (many levels)") {
  run_model(42, 200'000, 3ms, 7);
}

TEST_CASE("SystemTimer model: 200,000 random steps on tick 1 ms, 256 slots (multi-word bitmap)") {
  run_model(4242, 200'000, 1ms, 256);
}

TEST_CASE(
    "SystemTimer model: 400,000 random steps over 4 bases (adds from random threads, idle tasks "
    "re-added into other bases, pending ones moved in place) match the reference") {
  run_model(777, 400'000, 1ms, 20, 4);
}

TEST_CASE("SystemTimer model: 200,000 random steps over 8 bases, tick 2 ms, 64 slots") {
  run_model(31337, 200'000, 2ms, 64, 8);
}

TEST_CASE(
    "SystemTimer model, Concurrency::single_thread: 1,000,000 random steps on tick 1 ms, 20 "
    "slots match the reference") {
  run_model(20261207, 1'000'000, 1ms, 20, 1, purgatory::TimerOptions::Concurrency::single_thread);
}

TEST_CASE(
    "SystemTimer model, Concurrency::single_thread: 200,000 random steps on tick 3 ms, 7 slots") {
  run_model(4207, 200'000, 3ms, 7, 1, purgatory::TimerOptions::Concurrency::single_thread);
}

TEST_CASE(
    "SystemTimer model with slack: 1,000,000 random steps, 40% of adds with a slack of up to half "
    "the delay, match the reference (each task at its rounded deadline, never early)") {
  run_model(1207, 1'000'000, 1ms, 20, 1, {}, /*slack=*/true);
}

TEST_CASE("SystemTimer model with slack: 200,000 random steps on tick 3 ms, 7 slots, 4 bases") {
  run_model(3107, 200'000, 3ms, 7, 4, {}, /*slack=*/true);
}

TEST_CASE("SystemTimer model with slack, Concurrency::single_thread: 200,000 random steps") {
  run_model(1712, 200'000, 1ms, 20, 1, purgatory::TimerOptions::Concurrency::single_thread,
            /*slack=*/true);
}
