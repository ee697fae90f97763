// Several threads add and cancel while the reaper advances the real clock: every task ends with
// exactly one outcome, ran or cancelled (cancel() returned true), counted.
#include "purgatory/timer/system_timer.hpp"

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "timer_test_support.hpp"

using namespace std::chrono_literals;
using purgatory::test::CountingTask;

TEST_CASE(
    "SystemTimer stress: 4 threads x 5000 tasks, add/cancel racing expiry, one outcome each") {
  purgatory::SystemTimer timer(purgatory::TimerOptions{.name = "stress"});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  std::vector<std::vector<purgatory::Ref<CountingTask>>> tasks(kThreads);
  std::vector<std::vector<char>> cancelled(kThreads, std::vector<char>(kPerThread, 0));
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      std::mt19937 rng(static_cast<unsigned>(th) * 7919U + 1U);
      auto& mine = tasks[static_cast<std::size_t>(th)];
      for (int i = 0; i < kPerThread; ++i) {
        auto task = purgatory::make_task<CountingTask>();
        mine.push_back(task);
        // Delays around the tick so that many cancels meet the expiry head on.
        const auto delay = std::chrono::microseconds(static_cast<int>(rng() % 3000) - 200);
        timer.add(task, delay);
        if (rng() % 2 == 0) {
          const auto spin_until =
              std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 1500);
          while (std::chrono::steady_clock::now() < spin_until) {
          }
          cancelled[static_cast<std::size_t>(th)][static_cast<std::size_t>(i)] =
              task->cancel() ? 1 : 0;
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  // Wait (bounded) until nothing is pending any more: every run has started or been cancelled.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  auto all_settled = [&] {
    for (const auto& mine : tasks) {
      for (const auto& task : mine) {
        if (task->is_pending()) return false;
      }
    }
    return true;
  };
  while (!all_settled() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(all_settled());
  const auto handed_back = timer.close();  // joins the executor: every started run finished
  CHECK(handed_back.empty());
  int ran = 0, stopped = 0, bad = 0;
  for (std::size_t th = 0; th < tasks.size(); ++th) {
    for (std::size_t i = 0; i < tasks[th].size(); ++i) {
      const int runs = tasks[th][i]->runs.load();
      const int cancels = cancelled[th][i];
      ran += runs;
      stopped += cancels;
      if (runs + cancels != 1) ++bad;
    }
  }
  MESSAGE("ran " << ran << ", cancelled " << stopped);
  CHECK(bad == 0);
  CHECK(ran + stopped == kThreads * kPerThread);
  CHECK(stopped > 0);
  CHECK(ran > 0);
}

// Regression: add() used to publish the scheduled phase before the owning timer, so a cancel()
// racing it on another thread could follow a null timer pointer.
TEST_CASE("SystemTimer stress: add and cancel of one task racing on two threads, 20000 times") {
  purgatory::SystemTimer timer(purgatory::TimerOptions{.name = "race"});
  auto task = purgatory::make_task<CountingTask>();
  std::atomic<bool> go{false};
  std::atomic<int> cancels{0};
  std::thread canceller([&] {
    while (!go.load())
      std::this_thread::yield();
    for (int i = 0; i < 20000; ++i)
      cancels += task->cancel() ? 1 : 0;
  });
  go = true;
  for (int i = 0; i < 20000; ++i)
    timer.add(task, std::chrono::microseconds(i % 1500));
  canceller.join();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (task->is_pending() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  CHECK_FALSE(task->is_pending());
  timer.close();
  MESSAGE("runs " << task->runs.load() << ", successful cancels " << cancels.load());
  // Each add either moved a pending schedule or started a new one; every schedule that was not
  // moved ended in a run or a successful cancel, so there is at least one outcome in all.
  CHECK(task->runs.load() + cancels.load() >= 1);
}

// The reference count lives in the same atomic word as the state the timer changes under its
// lock: reference copies and drops on other threads must not disturb the state, nor the state
// changes the count. 64 tasks are added again and again (each time one is idle) while two threads
// keep copying and dropping references to them and sometimes cancel them, and the reaper expires
// them: every schedule ends with exactly one outcome, and each task is destroyed once at the end.
TEST_CASE(
    "SystemTimer stress: reference copies and drops on 2 threads racing add/cancel/expiry of "
    "the same 64 tasks, one outcome per schedule, each task destroyed once") {
  struct Counted : purgatory::TimerTask {
    Counted(std::atomic<int>& r, std::atomic<int>& d) : ran(r), destroyed(d) {}
    ~Counted() override { destroyed.fetch_add(1, std::memory_order_relaxed); }
    void run() override { ran.fetch_add(1, std::memory_order_relaxed); }
    std::atomic<int>& ran;
    std::atomic<int>& destroyed;
  };
  constexpr int kTasks = 64;
  constexpr int kAdds = 30000;
  std::atomic<int> ran{0};
  std::atomic<int> destroyed{0};
  std::atomic<int> stopped{0};
  int adds = 0;
  {
    std::vector<purgatory::Ref<Counted>> tasks;  // not written while the threads run
    for (int i = 0; i < kTasks; ++i)
      tasks.emplace_back(new Counted(ran, destroyed));
    purgatory::SystemTimer timer(purgatory::TimerOptions{.name = "refs"});
    std::atomic<bool> done{false};
    std::vector<std::thread> copiers;
    for (int c = 0; c < 2; ++c) {
      copiers.emplace_back([&, c] {
        std::mt19937 rng(static_cast<unsigned>(c) + 11U);
        while (!done.load(std::memory_order_relaxed)) {
          purgatory::Ref<Counted> copy = tasks[rng() % kTasks];
          for (int k = 0; k < 8; ++k) {  // copies made and dropped while the timer works
            purgatory::Ref<Counted> again = copy;
            again.reset();
          }
          if (rng() % 512 == 0 && copy->cancel()) stopped.fetch_add(1);
        }
      });
    }
    std::mt19937 rng(7U);
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    while (adds < kAdds && std::chrono::steady_clock::now() < give_up) {
      const auto& task = tasks[rng() % kTasks];
      if (task->is_pending()) continue;  // only this thread adds: idle stays idle until then
      timer.add(task, std::chrono::microseconds(rng() % 300));
      ++adds;
    }
    done.store(true);
    for (auto& t : copiers)
      t.join();
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (timer.size() != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    REQUIRE(timer.size() == 0);
    CHECK(timer.close().empty());  // joins the executor: every queued run has finished
    int extra_refs = 0;
    for (const auto& task : tasks)
      extra_refs += static_cast<int>(task->use_count()) - 1;
    CHECK(extra_refs == 0);
  }
  MESSAGE(adds << " adds: ran " << ran.load() << ", cancelled " << stopped.load());
  CHECK(adds > kAdds / 10);
  CHECK(ran.load() + stopped.load() == adds);
  CHECK(destroyed.load() == kTasks);  // each exactly once, when `tasks` went
}
