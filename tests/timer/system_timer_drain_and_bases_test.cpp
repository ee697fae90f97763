// SystemTimer promises that once did not hold: drain() waits for the executor, wheel_snapshot()'s
// cost does not grow with a base's lag, TimerOptions::bases rounds up to a power of two, and
// close()/drain() of many bases. Each test fails with its fix reverted.
#include "purgatory/timer/system_timer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "contract_support.hpp"
#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/periodic_task.hpp"
#include "thread_slot.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

using contract::Signal;

// A timer on a manual clock, driven from outside, whose expired tasks go to `executor`.
// In the run's mode, except with several bases: a single-thread timer has one.
TimerOptions manual_options(const ManualClock& clock, std::shared_ptr<Executor> executor,
                            std::size_t bases = 1) {
  return driven_by_hand(
      clock, std::move(executor), {.name = "drain", .tick = 1ms, .wheel_size = 20, .bases = bases},
      bases > 1 ? std::optional(TimerOptions::Concurrency::thread_safe) : std::nullopt);
}

TEST_CASE(
    "regression: wheel_snapshot() does not grow with a base's lag behind the clock "
    "(tick 1 us, a base 300 s behind)") {
  // Base 0 holds a task 600 s out; the clock moves 300 s with no expiry pass; a task added on base
  // 1 catches its empty wheel up. Base 0's levels now lag base 1's by 300 s: 3e8 ticks of level 0.
  // Before the fix the snapshot walked every tick of that lag under base 0's lock (1-2 s); the
  // buckets it can hold are only 2 * wheel_size per level. Compared with the same timer's
  // snapshot before the lag (the fastest of 3 each), with a floor for a noisy machine.
  ManualClock clock;
  SystemTimer timer(driven_by_hand(clock, std::make_shared<InlineExecutor>(),
                                   {.name = "lag", .tick = 1us, .wheel_size = 20, .bases = 2}));
  const auto fastest_of_3 = [&] {
    auto best = std::chrono::steady_clock::duration::max();
    for (int i = 0; i < 3; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const WheelSnapshot snap = timer.wheel_snapshot(64);
      best = std::min(best, std::chrono::steady_clock::now() - start);
      CHECK(snap.tasks == timer.size());
    }
    return best;
  };
  detail::set_timer_thread_slot(0);
  auto distant = make_task([] {});
  timer.add(distant, 600s);
  detail::set_timer_thread_slot(1);
  auto soon = make_task([] {});
  timer.add(soon, 1s);
  const auto before = fastest_of_3();
  clock.advance(300s);
  auto caught_up = make_task([] {});
  (void)soon->cancel();  // base 1 empty again: the next add catches its wheel up with the clock
  timer.add(caught_up, 1s);
  const auto lagging = fastest_of_3();
  INFO("snapshot before the lag: "
       << std::chrono::duration<double, std::micro>(before).count()
       << " us, with it: " << std::chrono::duration<double, std::micro>(lagging).count() << " us");
  CHECK(lagging < std::max<std::chrono::steady_clock::duration>(100 * before, 50ms));
  const WheelSnapshot snap = timer.wheel_snapshot(64);
  CHECK(snap.tasks == 2);
  detail::set_timer_thread_slot(0);
  timer.close();
}

TEST_CASE(
    "regression: TimerOptions::bases is rounded up to a power of two: 3 gives 4, 5 "
    "gives 8, 64 gives 64, 1000 gives 1024") {
  for (const auto& bases : std::vector<std::pair<std::size_t, std::size_t>>{
           {1, 1}, {2, 2}, {3, 4}, {5, 8}, {64, 64}, {65, 128}, {1000, 1024}, {1024, 1024}}) {
    SystemTimer timer(TimerOptions{.driver = TimerOptions::Driver::external, .bases = bases.first});
    INFO("bases = " << bases.first);
    CHECK(timer.base_count() == bases.second);
  }
}

// A task counting its runs.
struct Counted : TimerTask {
  std::atomic<int> runs{0};

 protected:
  void run() override { runs.fetch_add(1); }
};

TEST_CASE(
    "regression: close() and drain() of a timer with 128 bases (more than the 64 "
    "locks ThreadSanitizer's deadlock detector tracks): every task handed back or run once") {
  ManualClock clock;
  std::vector<purgatory::Ref<Counted>> tasks;
  {
    SystemTimer timer(manual_options(clock, std::make_shared<InlineExecutor>(), 128));
    REQUIRE(timer.base_count() == 128);
    for (std::uint32_t slot = 0; slot < 128; ++slot) {
      detail::set_timer_thread_slot(slot);  // a task on every base
      tasks.push_back(make_task<Counted>());
      timer.add(tasks.back(), std::chrono::milliseconds(1 + slot % 2));
    }
    detail::set_timer_thread_slot(0);
    clock.advance(1ms);  // the odd slots' tasks are due at 2 ms: drain(0) hands them back
    const std::vector<TaskRef> back = timer.drain(0ms);
    CHECK(back.size() == 64);
    CHECK(timer.is_closed());
    int outcomes_wrong = 0;
    for (const auto& t : tasks) {
      const bool handed_back = std::find(back.begin(), back.end(), t) != back.end();
      outcomes_wrong += (t->runs.load() + (handed_back ? 1 : 0)) == 1 && !t->is_pending() ? 0 : 1;
    }
    CHECK(outcomes_wrong == 0);
  }
  tasks.clear();
  SystemTimer timer(manual_options(clock, std::make_shared<InlineExecutor>(), 128));
  for (std::uint32_t slot = 0; slot < 128; ++slot) {
    detail::set_timer_thread_slot(slot);
    tasks.push_back(make_task<Counted>());
    timer.add(tasks.back(), 1s);
  }
  detail::set_timer_thread_slot(0);
  const std::vector<TaskRef> back = timer.close();
  CHECK(back.size() == 128);
  CHECK(timer.size() == 0);
  CHECK(std::none_of(tasks.begin(), tasks.end(), [](const auto& t) { return t->is_pending(); }));
}

}  // namespace
}  // namespace purgatory::test
