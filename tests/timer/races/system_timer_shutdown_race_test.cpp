// timer/system_timer.hpp: close() and drain() racing adds, runs and periodic tasks, on the hooked
// timer at its named race points.
#include "purgatory/timer/system_timer.hpp"

#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/timer/periodic_task.hpp"
#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "thread_slot.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "system_timer.hpp: close() lets the timer's own executor finish the tasks that already "
    "expired: they have run when close() returns") {
  ManualClock clock;
  SystemTimer timer(TimerOptions{.name = "finish", .clock = &clock});  // reaper + own executor
  Signal in_first;
  Signal release;
  Signal close_returned;
  std::atomic<int> ran{0};
  timer.add(purgatory::make_task([&] {
              in_first.set();
              CHECK(release.wait());
              // A close() that does not wait for the executor returns now; give it the chance
              // before the other five run (a close() that waits costs these 200 ms).
              (void)close_returned.wait(200ms);
              ran.fetch_add(1);
            }),
            1ms);
  for (int i = 0; i < 5; ++i)
    timer.add(purgatory::make_task([&] { ran.fetch_add(1); }), 1ms);
  clock.advance(1ms);
  REQUIRE(in_first.wait());  // the executor is busy with the first; five more expired behind it
  RaceSchedule schedule(
      RaceSchedule::at_each("SystemTimer::close: closed, unlocked", [&] { release.set(); }));
  const auto handed_back = timer.close();
  const int ran_at_return = ran.load();
  close_returned.set();
  CHECK(handed_back.empty());
  CHECK(ran_at_return == 6);
  CHECK(schedule.hits("SystemTimer::close: closed, unlocked") == 1);
}

TEST_CASE(
    "system_timer.hpp: exactly one outcome per task (README): it runs, cancel() returned true, or "
    "close() handed it back, nothing runs after close() returned (real clock, seeded schedule, 10 "
    "rounds)") {
  std::uint64_t hits = 0;
  for_each_seed(10, [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    SystemTimer timer(TimerOptions{.name = "outcomes"});  // reaper + own executor
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.3, .max_pause = 100us});
    constexpr int kTasks = 150;
    std::vector<purgatory::Ref<CountingTask>> tasks;
    for (int i = 0; i < kTasks; ++i) {
      tasks.push_back(purgatory::make_task<CountingTask>());
      timer.add(tasks.back(), Nanos{static_cast<Nanos::rep>(rng() % 12'000'000)});
    }
    std::vector<int> cancelled(kTasks, 0);
    std::thread canceller([&, r = rng()] {
      std::mt19937_64 local(r);
      for (int i = 0; i < kTasks; ++i) {
        const auto k = static_cast<std::size_t>(local() % kTasks);
        if (tasks[k]->cancel()) ++cancelled[k];
        if (local() % 8 == 0) std::this_thread::sleep_for(100us);
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 10'000));
    const auto handed_back = timer.close();
    int runs_at_close = 0;
    for (const auto& t : tasks)
      runs_at_close += t->runs.load();
    canceller.join();
    std::set<const TimerTask*> back;
    for (const auto& t : handed_back)
      back.insert(t.get());
    int runs_after = 0;
    for (int i = 0; i < kTasks; ++i) {
      const int back_count = back.count(tasks[i].get()) != 0 ? 1 : 0;
      CHECK(tasks[i]->runs.load() + cancelled[i] + back_count == 1);
      runs_after += tasks[i]->runs.load();
    }
    CHECK(runs_after == runs_at_close);
    hits += schedule.hits("SystemTimer::advance") + schedule.hits("TimerTask::cancel");
  });
  CHECK(hits > 0);
}

// Adds from 4 threads on 8 bases racing close() or drain(0): close() and drain() set their flag
// and visit the bases one at a time. An add() that returned has its task handed back or run, once;
// one that threw TimerRejected left it idle; none stays pending (an add linking after its base was
// visited would). `end` is close() or drain(0).
template <class End>
void adds_racing_the_end(const char* name, End end) {
  for_each_seed(20, [&](std::uint64_t seed) {
    INFO(name);
    std::mt19937_64 rng(seed);
    DrivenTimer<InlineExecutor> m({.name = "adds-end", .bases = 8});
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.3, .max_pause = 50us});
    constexpr int kThreads = 4;
    constexpr int kPerThread = 100;
    std::vector<purgatory::Ref<CountingTask>> tasks(kThreads * kPerThread);
    std::vector<char> accepted(tasks.size(), 0);
    for (auto& t : tasks)
      t = purgatory::make_task<CountingTask>();
    std::vector<std::thread> adders;
    for (int a = 0; a < kThreads; ++a) {
      adders.emplace_back([&, a] {
        for (int i = 0; i < kPerThread; ++i) {
          const auto k = static_cast<std::size_t>(a * kPerThread + i);
          purgatory::detail::set_timer_thread_slot(static_cast<std::uint32_t>(2 * a + i % 2));
          try {
            m.timer.add(tasks[k], i % 3 == 0 ? 0ms : 5ms);  // due at once: runs inside add()
            accepted[k] = 1;
          } catch (const TimerRejected&) {
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
    const std::vector<TaskRef> back = end(m.timer);
    for (std::thread& t : adders)
      t.join();
    std::set<const TimerTask*> handed;
    for (const TaskRef& t : back)
      handed.insert(t.get());
    int wrong = 0;
    for (std::size_t k = 0; k < tasks.size(); ++k) {
      const int outcomes = tasks[k]->runs.load() + (handed.count(tasks[k].get()) != 0 ? 1 : 0);
      wrong += !tasks[k]->is_pending() && outcomes == (accepted[k] != 0 ? 1 : 0) ? 0 : 1;
    }
    CHECK(wrong == 0);
    CHECK(m.timer.size() == 0);
    CHECK(schedule.hits("SystemTimer::close: closed, before handing back a base's tasks") == 8);
  });
}

TEST_CASE(
    "system_timer.hpp: close() racing adds from 4 threads on 8 bases: every add() that returned "
    "has its task handed back or run once, every other threw TimerRejected, none stays pending "
    "(seeded schedule, 20 rounds)") {
  adds_racing_the_end("close()", [](SystemTimer& t) { return t.close(); });
}

TEST_CASE(
    "system_timer.hpp: drain(0) racing adds from 4 threads on 8 bases: every add() that returned "
    "has its task handed back or run once, every other threw TimerRejected, none stays pending "
    "(seeded schedule, 20 rounds)") {
  adds_racing_the_end("drain(0)", [](SystemTimer& t) { return t.drain(0ms); });
}

TEST_CASE(
    "system_timer.hpp: drain() stops a periodic task whose run is in progress: no run after "
    "drain() returned") {
  DrivenTimer<InlineExecutor> m({.name = "drain-periodic"});
  auto beat = purgatory::make_periodic([] {});
  std::thread drainer;
  std::vector<TaskRef> handed_back{purgatory::make_task<CountingTask>()};
  Signal waiting;
  auto options = RaceSchedule::at_first("PeriodicTask::run: started, before run_once", [&] {
    // The first run is under way: drain() starts on another thread. With nothing in the wheel it
    // waits for this run (its batch is with the executor): let the run go on once it does.
    drainer = std::thread([&] { handed_back = m.timer.drain(); });
    CHECK(waiting.wait());
    CHECK_FALSE(m.timer.is_closed());
  });
  options.actions.push_back(
      {"SystemTimer::drain: the wheels are empty, tasks handed to the executor",
       [&] { waiting.set(); }});
  RaceSchedule schedule(std::move(options));
  beat->start(m.timer, 1ms, 1ms, PeriodicTask::Mode::fixed_rate);
  m.step(1ms);  // the first run, during which drain() begins
  drainer.join();
  CHECK(m.timer.is_closed());
  CHECK(handed_back.empty());
  CHECK(beat->run_count() == 1);
  for (int i = 0; i < 5; ++i)
    m.step(1ms);
  CHECK(beat->run_count() == 1);
  CHECK_FALSE(beat->is_pending());
}
