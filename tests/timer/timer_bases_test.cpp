// The timer's bases (one wheel and lock each; a thread adds to its own) and the ahead-of-time
// cascade: tasks added by one thread, cancelled or moved by another, close() and drain() over
// every base, and a coarse bucket emptied before it comes due.
#include "purgatory/timer/system_timer.hpp"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "thread_slot.hpp"
#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::Nanos;
using namespace purgatory::test;

namespace {

// A task counting its outcomes: runs, and successful cancels made by any thread.
struct OutcomeTask : CountingTask {
  std::atomic<int> cancels{0};
};

}  // namespace

TEST_CASE(
    "SystemTimer bases: rounded up to a power of two, at most 1024, 0 gives one per hardware "
    "thread, at most 64, more than 1024 is refused, naming the value") {
  const auto external = [](std::size_t bases) {
    return purgatory::TimerOptions{.driver = purgatory::TimerOptions::Driver::external,
                                   .bases = bases};
  };
  CHECK(purgatory::SystemTimer(external(1)).base_count() == 1);
  CHECK(purgatory::SystemTimer(external(3)).base_count() == 4);
  CHECK(purgatory::SystemTimer(external(1024)).base_count() == 1024);
  purgatory::SystemTimer automatic(external(0));
  const std::size_t hardware = std::max(1U, std::thread::hardware_concurrency());
  CHECK(automatic.base_count() >= std::min<std::size_t>(hardware, 64));
  CHECK(automatic.base_count() <= 64);
  CHECK((automatic.base_count() & (automatic.base_count() - 1)) == 0);
  CHECK_THROWS_WITH_AS(purgatory::SystemTimer(external(1025)), doctest::Contains("got 1025"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(purgatory::SystemTimer(external(4096)), doctest::Contains("got 4096"),
                       std::invalid_argument);
}

TEST_CASE(
    "SystemTimer bases: a task added from one base's thread and cancelled from another's runs "
    "never, one moved from another thread runs once, at its new deadline") {
  ManualTimer m(1ms, 20, 0, 4);
  purgatory::detail::set_timer_thread_slot(0);
  auto a = purgatory::make_task<CountingTask>();
  auto b = purgatory::make_task<CountingTask>();
  m.timer.add(a, 10ms);
  m.timer.add(b, 10ms);
  std::thread other([&] {
    purgatory::detail::set_timer_thread_slot(1);
    CHECK(a->cancel());
    m.timer.add(b, 30ms);  // pending: moved in place, in base 0
    CHECK(m.timer.reschedule(*b, 20ms));
  });
  other.join();
  m.advance(19ms);
  CHECK(b->runs == 0);
  m.advance(1ms);
  CHECK(b->runs == 1);
  CHECK(a->runs == 0);
  CHECK(m.timer.size() == 0);
}

TEST_CASE(
    "SystemTimer bases: 4 threads on 4 bases add, then cancel and move each other's tasks while "
    "the reaper expires them: exactly one outcome per task") {
  purgatory::SystemTimer timer(purgatory::TimerOptions{.name = "bases", .bases = 4});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 4000;
  // Each thread owns the tasks it made (kept alive to the end); others reach them through `all`.
  std::vector<std::vector<purgatory::Ref<OutcomeTask>>> owned(kThreads);
  std::vector<std::atomic<OutcomeTask*>> all(kThreads * kPerThread);
  std::atomic<int> moves{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      purgatory::detail::set_timer_thread_slot(static_cast<std::uint32_t>(th));
      std::mt19937 rng(static_cast<unsigned>(th) * 104729U + 3U);
      auto& mine = owned[static_cast<std::size_t>(th)];
      for (int i = 0; i < kPerThread; ++i) {
        mine.push_back(purgatory::make_task<OutcomeTask>());
        timer.add(mine.back(), std::chrono::microseconds(rng() % 3000));
        all[static_cast<std::size_t>(th * kPerThread + i)].store(mine.back().get());
        // Act on a task some thread added (most likely another base's).
        OutcomeTask* victim = all[rng() % all.size()].load();
        if (victim == nullptr) continue;
        switch (rng() % 3) {
          case 0:
            if (victim->cancel()) victim->cancels.fetch_add(1);
            break;
          case 1:  // a move: in place if scheduled, into this thread's base if queued
            if (timer.reschedule(*victim, std::chrono::microseconds(rng() % 2000))) ++moves;
            break;
          default:
            break;
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (timer.size() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(2ms);
  }
  REQUIRE(timer.size() == 0);
  CHECK(timer.close().empty());  // joins the executor: every queued run finished
  int ran = 0, cancelled = 0, bad = 0;
  for (const auto& mine : owned) {
    for (const auto& t : mine) {
      ran += t->runs.load();
      cancelled += t->cancels.load();
      if (t->runs.load() + t->cancels.load() != 1) ++bad;
    }
  }
  MESSAGE("ran " << ran << ", cancelled " << cancelled << ", moved " << moves.load());
  CHECK(bad == 0);
  CHECK(ran > 0);
  CHECK(cancelled > 0);
  CHECK(moves.load() > 0);
}

TEST_CASE("SystemTimer bases: close() hands back every task of every base exactly once") {
  ManualTimer m(1ms, 20, 0, 4);
  std::vector<purgatory::Ref<CountingTask>> tasks;
  for (std::uint32_t slot = 0; slot < 4; ++slot) {
    purgatory::detail::set_timer_thread_slot(slot);
    for (int i = 0; i < 250; ++i) {
      tasks.push_back(purgatory::make_task<CountingTask>());
      m.timer.add(tasks.back(), std::chrono::milliseconds(1 + i * 40));  // up to 10 s: 3 levels
    }
  }
  m.advance(2s);
  const auto before = m.timer.size();
  const auto handed_back = m.timer.close();
  CHECK(handed_back.size() == before);
  int ran = 0, pending = 0;
  for (const auto& t : tasks) {
    ran += t->runs.load();
    pending += t->is_pending() ? 1 : 0;
  }
  CHECK(pending == 0);
  CHECK(static_cast<std::size_t>(ran) + handed_back.size() == tasks.size());
  for (const auto& t : handed_back)
    CHECK(static_cast<CountingTask&>(*t).runs == 0);
}

TEST_CASE(
    "SystemTimer bases: drain() runs what falls due in every base within max_wait and hands "
    "back the rest") {
  ManualTimer m(1ms, 20, 0, 4);
  std::vector<purgatory::Ref<CountingTask>> soon, late;
  for (std::uint32_t slot = 0; slot < 4; ++slot) {
    purgatory::detail::set_timer_thread_slot(slot);
    for (int i = 0; i < 10; ++i) {
      soon.push_back(purgatory::make_task<CountingTask>());
      m.timer.add(soon.back(), std::chrono::milliseconds(5 + i));
      late.push_back(purgatory::make_task<CountingTask>());
      m.timer.add(late.back(), 24h);
    }
  }
  std::atomic<bool> stop{false};
  std::thread clock_mover([&] {
    // Moves the timer's time until drain() returns, with no bound of its own: a mover that stops
    // after a fixed distance can finish before drain() reads the clock, and then the drain's
    // deadline is never reached (seen under Wine with both cores busy). The late tasks are 24 h
    // out, further than this loop gets in any run.
    while (!stop.load()) {
      m.clock.advance(1ms);
      std::this_thread::sleep_for(100us);
    }
  });
  const auto handed_back = m.timer.drain(100ms);
  stop = true;
  clock_mover.join();
  for (const auto& t : soon)
    CHECK(t->runs == 1);
  CHECK(handed_back.size() == late.size());
  for (const auto& t : late)
    CHECK(t->runs == 0);
}

TEST_CASE(
    "SystemTimer: a coarse bucket is cascaded ahead of time, a share per tick, and when it comes "
    "due holds only the tasks due at its start, which run from it") {
  // 1 ms x 20: level 1 buckets are 20 ms, level 2 buckets 400 ms. 100,000 tasks due in the level-2
  // bucket [400, 800) ms, added at 0: that bucket is the next of level 2 right away, so its
  // cascade is spread over [0, 400) ms.
  ManualTimer m(1ms, 20, 0, 1);
  std::vector<purgatory::TaskRef> tasks;
  std::mt19937 rng(5U);
  std::size_t due_at_start = 0;  // due at 400 ms exactly: settled in the level-2 bucket
  int ran_at_start = 0;
  for (int i = 0; i < 100000; ++i) {
    const auto delay = std::chrono::milliseconds(400 + rng() % 400);
    if (delay == 400ms) {
      ++due_at_start;
      tasks.push_back(purgatory::make_task([&] { ran_at_start += m.clock.now() == 400ms; }));
    } else {
      tasks.push_back(purgatory::make_task([] {}));
    }
    m.timer.add(tasks.back(), delay);
  }
  REQUIRE(due_at_start > 0);
  REQUIRE(m.timer.size_per_level().size() == 3);
  const std::size_t at_start = m.timer.size_per_level()[2];
  CHECK(at_start == 100000);
  std::size_t at_half = 0;
  for (int ms = 1; ms < 400; ++ms) {
    m.advance(1ms);
    if (ms == 200) at_half = m.timer.size_per_level()[2];
  }
  // Paced: about half moved by half time (it must be done a tick early), not all at the end,
  // nor all at once.
  CHECK(at_half < at_start * 6 / 10);
  CHECK(at_half > at_start * 4 / 10);
  // Before it comes due at 400 ms only the tasks due at its start are left: never moved down.
  CHECK(m.timer.size_per_level()[2] == due_at_start);
  CHECK(m.timer.size() == 100000);  // and nothing ran early
  m.advance(1ms);
  CHECK(ran_at_start == static_cast<int>(due_at_start));  // at 400 ms, from the coarse bucket
  CHECK(m.timer.size_per_level()[2] == 0);
}
