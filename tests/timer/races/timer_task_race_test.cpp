// timer/timer_task.hpp: exactly one outcome when cancel() or add() meets a task in the window of
// another add(), on the hooked timer at its named race points.
#include "purgatory/timer/timer_task.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "thread_slot.hpp"
#include "threads.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "timer_task.hpp: exactly one of 'the run happens' and 'cancel() returned true' holds for "
    "every schedule: cancel() racing expiry on a 2-thread executor (seeded schedule, 12 rounds)") {
  // Two owner threads each cycle 4 tasks through add -> cancel -> wait for the outcome, while a
  // clock thread expires them onto a 2-thread pool. Race points pause between cancel()'s look at
  // the task and the timer's lock, between expiry and execute(), and before the executor's claim.
  constexpr int kOwners = 2;
  constexpr int kTasksPerOwner = 4;
  constexpr int kCycles = 20;
  struct Outcome : TimerTask {
    std::atomic<int> runs{0};
    void run() override { runs.fetch_add(1); }
  };
  std::uint64_t cancel_window_hits = 0;
  std::uint64_t claim_window_hits = 0;
  int cancelled_total = 0;
  int ran_total = 0;
  for_each_seed(12, [&](std::uint64_t seed) {
    DrivenTimer<PoolExecutor> m({.name = "exactly-once"}, /*threads=*/2);
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.3, .max_pause = 60us});
    DriverThread clock_thread(m);
    std::array<int, kOwners> adds{};
    std::array<int, kOwners> cancels{};
    std::array<int, kOwners> runs{};
    std::array<bool, kOwners> stuck{};
    std::vector<std::thread> owners;
    for (int o = 0; o < kOwners; ++o) {
      owners.emplace_back([&, o] {
        std::mt19937_64 rng(seed + static_cast<std::uint64_t>(o));
        std::vector<purgatory::Ref<Outcome>> tasks;
        std::vector<int> cancelled(kTasksPerOwner, 0);
        for (int i = 0; i < kTasksPerOwner; ++i)
          tasks.push_back(purgatory::make_task<Outcome>());
        for (int c = 0; c < kCycles && !stuck[o]; ++c) {
          for (int i = 0; i < kTasksPerOwner; ++i) {
            m.timer.add(tasks[i], Nanos{static_cast<Nanos::rep>(rng() % 3'000'000)});
            ++adds[o];
          }
          for (int i = 0; i < kTasksPerOwner; ++i) {
            if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
            if (tasks[i]->cancel()) ++cancelled[i];
          }
          // Every schedule must end exactly once: wait for the runs not cancelled.
          const auto give_up = std::chrono::steady_clock::now() + 20s;
          for (int i = 0; i < kTasksPerOwner; ++i) {
            while (tasks[i]->runs.load() + cancelled[i] < c + 1 &&
                   std::chrono::steady_clock::now() < give_up) {
              std::this_thread::yield();
            }
            if (tasks[i]->runs.load() + cancelled[i] != c + 1) stuck[o] = true;
          }
        }
        for (int i = 0; i < kTasksPerOwner; ++i) {
          runs[o] += tasks[i]->runs.load();
          cancels[o] += cancelled[i];
        }
      });
    }
    for (std::thread& t : owners)
      t.join();
    clock_thread.stop();
    m.timer.close();
    m.executor->shutdown();
    for (int o = 0; o < kOwners; ++o) {
      CHECK_FALSE(stuck[o]);
      CHECK(runs[o] + cancels[o] == adds[o]);  // never both, never neither
      cancelled_total += cancels[o];
      ran_total += runs[o];
    }
    cancel_window_hits += schedule.hits("TimerTask::cancel: saw it scheduled");
    claim_window_hits += schedule.hits("ExpiredBatch::run_all: before the claim");
  });
  CHECK(cancel_window_hits > 0);
  CHECK(claim_window_hits > 0);
  CHECK(cancelled_total > 0);  // both outcomes happened
  CHECK(ran_total > 0);
}

namespace {

// Runs `second` on another thread at the moment an add() on this thread has taken `task` (one
// CAS to scheduled) but not yet stored its base, and holds the add there until `second` has
// seen that window (`waiting_point`, hit at least once). The task is first scheduled and
// cancelled in base 1, so the base it last held is a stale one: a reader that trusted it would
// lock the wrong base. Returns, once `second` has returned too, whether it saw the window.
bool race_into_base_store(ManualTimer& m, const TaskRef& task, const char* waiting_point,
                          const std::function<void()>& second) {
  std::thread other;
  purgatory::detail::set_timer_thread_slot(1);
  m.timer.add(task, 5ms);
  REQUIRE(task->cancel());  // last held by base 1, now retired: the stale base of the race
  RaceSchedule schedule(
      RaceSchedule::at_first("SystemTimer::schedule: taken, before storing its base", [&] {
        other = std::thread([&] {
          purgatory::detail::set_timer_thread_slot(2);
          second();
        });
        (void)spin_until([&] { return schedule.hits(waiting_point) != 0; }, 10s);
      }));
  purgatory::detail::set_timer_thread_slot(0);
  m.timer.add(task, 10ms);
  // Joined while `second` and the schedule are alive: it is still inside cancel() or add(),
  // passing race points, when the add above returns.
  if (other.joinable()) other.join();
  return schedule.hits(waiting_point) > 0;
}

}  // namespace

TEST_CASE(
    "timer_task.hpp: a cancel() meeting a task an add() has just taken, its base not stored yet, "
    "waits for the add and cancels it: the task never runs (exactly one outcome)") {
  ManualTimer m(1ms, 20, 0, /*bases=*/4);
  auto task = purgatory::make_task<CountingTask>();
  std::atomic<int> cancelled{-1};
  const bool saw =
      race_into_base_store(m, task, "TimerTask::cancel: scheduled, its base not stored yet",
                           [&] { cancelled = task->cancel() ? 1 : 0; });
  CHECK(saw);
  CHECK(cancelled == 1);
  CHECK_FALSE(task->is_pending());
  CHECK(m.timer.size() == 0);
  m.advance(50ms);
  CHECK(task->runs == 0);
}

TEST_CASE(
    "timer_task.hpp: an add() meeting a task another add() has just taken, its base not stored "
    "yet, waits for it, then moves the task in place: it runs once, at the later deadline") {
  ManualTimer m(1ms, 20, 0, /*bases=*/4);
  auto task = purgatory::make_task<CountingTask>();
  const bool saw =
      race_into_base_store(m, task, "SystemTimer::schedule: scheduled, its base not stored yet",
                           [&] { m.timer.add(task, 30ms); });
  CHECK(saw);
  CHECK(m.timer.size() == 1);
  m.advance(29ms);
  CHECK(task->runs == 0);
  m.advance(1ms);
  CHECK(task->runs == 1);
  CHECK(m.timer.size() == 0);
}
