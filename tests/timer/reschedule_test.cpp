#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"

#include <map>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::Nanos;
using namespace purgatory::test;

TEST_CASE("SystemTimer::reschedule moves a pending task, an idle one is left alone") {
  ManualTimer m;
  auto task = purgatory::make_task<CountingTask>();
  CHECK_FALSE(m.timer.reschedule(*task, 5ms));  // never added
  CHECK_FALSE(task->is_pending());
  m.timer.add(task, 10ms);
  CHECK(m.timer.reschedule(*task, 30ms));
  CHECK(m.timer.size() == 1);
  m.advance(10ms);
  CHECK(task->runs == 0);
  CHECK(m.timer.reschedule(*task, 5ms));  // earlier again: due at 15 ms
  m.advance(5ms);
  CHECK(task->runs == 1);
  CHECK_FALSE(m.timer.reschedule(*task, 5ms));  // it ran
  m.advance(100ms);
  CHECK(task->runs == 1);
}

TEST_CASE("SystemTimer::reschedule racing expiry: expired-not-started moves, started does not") {
  purgatory::ManualClock clock;
  struct Holding : purgatory::Executor {
    std::vector<purgatory::ExpiredBatch> held;
    void execute(purgatory::ExpiredBatch& batch) override {
      held.push_back(std::move(batch));
      batch = purgatory::ExpiredBatch();
    }
  };
  auto exec = std::make_shared<Holding>();
  purgatory::SystemTimer timer(purgatory::TimerOptions{
      .clock = &clock, .executor = exec, .driver = purgatory::TimerOptions::Driver::external});
  purgatory::ExternalDriver driver(timer);
  auto task = purgatory::make_task<CountingTask>();
  timer.add(task, 5ms);
  clock.advance(5ms);
  driver.advance_clock();
  REQUIRE(exec->held.size() == 1);
  CHECK(timer.reschedule(*task, 10ms));  // not started: it runs at the new deadline instead
  exec->held[0].run_all();
  exec->held.clear();
  CHECK(task->runs == 0);
  clock.advance(10ms);
  driver.advance_clock();
  REQUIRE(exec->held.size() == 1);
  exec->held[0].run_all();  // started (and finished)
  CHECK(task->runs == 1);
  CHECK_FALSE(timer.reschedule(*task, 10ms));  // it ran at the old deadline: nothing moves
}

TEST_CASE(
    "SystemTimer::reschedule model: 1,000,000 random reschedules, each task runs once at "
    "its last deadline, never early") {
  ManualTimer m;
  constexpr int kTasks = 1000;
  struct Probe : purgatory::TimerTask {
    std::vector<std::pair<int, Nanos>>* fired = nullptr;
    const purgatory::Clock* clock = nullptr;
    int id = 0;
    void run() override { fired->emplace_back(id, clock->now()); }
  };
  std::vector<std::pair<int, Nanos>> fired;
  std::vector<purgatory::Ref<Probe>> tasks;
  for (int i = 0; i < kTasks; ++i) {
    auto p = purgatory::make_task<Probe>();
    p->fired = &fired;
    p->clock = &m.clock;
    p->id = i;
    tasks.push_back(p);
  }
  std::map<int, std::pair<std::int64_t, std::int64_t>> pending;  // id -> (deadline, expiration)
  std::mt19937_64 rng(99);
  const std::int64_t tick = 1'000'000;
  std::int64_t reschedules = 0, failures = 0;
  while (reschedules < 1'000'000 && failures == 0) {
    const int id = static_cast<int>(rng() % kTasks);
    const auto roll = rng() % 100;
    const std::int64_t now = m.clock.now().count();
    if (roll < 80) {  // reschedule (most calls hit a pending task)
      const std::int64_t delay = 1 + static_cast<std::int64_t>(rng() % 3'000'000'000ULL);
      const bool was_pending = pending.count(id) == 1;
      const bool moved = m.timer.reschedule(*tasks[static_cast<std::size_t>(id)], Nanos{delay});
      if (moved != was_pending) ++failures;
      if (moved) pending[id] = {now + delay, (now + delay + tick - 1) / tick * tick};
      ++reschedules;
    } else if (roll < 90) {  // add an idle task
      if (pending.count(id) == 0) {
        const std::int64_t delay = 1 + static_cast<std::int64_t>(rng() % 3'000'000'000ULL);
        m.timer.add(tasks[static_cast<std::size_t>(id)], Nanos{delay});
        pending[id] = {now + delay, (now + delay + tick - 1) / tick * tick};
      }
    } else {  // advance
      m.advance(Nanos{static_cast<std::int64_t>(rng() % 50'000'000)});
      const std::int64_t t = m.clock.now().count();
      std::size_t due = 0;
      for (const auto& [pid, dl] : pending)
        due += dl.second <= t ? 1 : 0;
      if (fired.size() != due) ++failures;
      for (const auto& [fid, at] : fired) {
        auto it = pending.find(fid);
        // Ran once, at its last deadline's tick: not before the deadline, not a tick after.
        if (it == pending.end() || at.count() < it->second.first || it->second.second > t) {
          ++failures;
        } else {
          pending.erase(it);
        }
      }
      fired.clear();
    }
  }
  CHECK(failures == 0);
  CHECK(reschedules == 1'000'000);
  m.advance(10s);
  CHECK(fired.size() == pending.size());
}
