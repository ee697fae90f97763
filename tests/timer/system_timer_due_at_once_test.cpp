// system_timer.hpp's promise "No task runs inside the call that added it": a task added when
// already due is taken by the driver's next pass, never by add(), add_at() or reschedule()
// themselves, whatever the executor. With an InlineExecutor a task that re-adds itself from its
// own run() so goes round the driver's loop: the stack stays flat however often it does.
#include "purgatory/timer/system_timer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include <doctest/doctest.h>

#include "purgatory/timer/periodic_task.hpp"
#include "timer_contract_support.hpp"

namespace {

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::test;

// How deep runs nest on this thread, the deepest seen, and runs that began inside an add().
struct Nesting {
  static thread_local int depth;
  static thread_local bool in_add;
  std::atomic<int> deepest{0};
  std::atomic<std::uint64_t> runs{0};
  std::atomic<std::uint64_t> inside_add{0};

  // Brackets one run: call enter() first and leave() last.
  void enter() {
    if (in_add) inside_add.fetch_add(1, std::memory_order_relaxed);
    const int d = ++depth;
    int seen = deepest.load(std::memory_order_relaxed);
    while (d > seen && !deepest.compare_exchange_weak(seen, d, std::memory_order_relaxed)) {
    }
    runs.fetch_add(1, std::memory_order_relaxed);
  }
  static void leave() { --depth; }

  // Calls `add` with the in-add mark set on this thread.
  template <class F>
  static void adding(F&& add) {
    in_add = true;
    add();
    in_add = false;
  }
};
thread_local int Nesting::depth = 0;
thread_local bool Nesting::in_add = false;

// Re-adds itself as due (delay 0, or a deadline already passed) from its own run, `left` times.
class Rearming final : public TimerTask {
 public:
  enum class How { add, add_at, reschedule_then_add };
  Rearming(SystemTimer& timer, Nesting& nesting, std::uint64_t times, How how)
      : timer_(timer), nesting_(nesting), left_(times), how_(how) {}

  [[nodiscard]] bool finished() const { return left_.load() == 0; }

 protected:
  void run() override {
    nesting_.enter();
    if (left_.fetch_sub(1) > 1) {
      Nesting::adding([&] {
        const Ref<Rearming> self(this);
        switch (how_) {
          case How::add:
            timer_.add(self, Nanos::zero());
            break;
          case How::add_at:
            timer_.add_at(self, timer_.clock().now() - 1ms);
            break;
          case How::reschedule_then_add:
            // Not pending while it runs: reschedule() finds nothing, then add() takes it.
            CHECK_FALSE(timer_.reschedule(*this, Nanos::zero()));
            timer_.add(self, -1ms);
            break;
        }
      });
    }
    Nesting::leave();
  }

 private:
  SystemTimer& timer_;
  Nesting& nesting_;
  std::atomic<std::uint64_t> left_;
  const How how_;
};

// Fewer rounds under a sanitizer (5-20x slower): the depth is the same after 1,000 as after 10^6.
constexpr std::uint64_t kReadds = kSanitized ? 100'000 : 1'000'000;

TEST_CASE(
    "system_timer.hpp: under InlineExecutor a task re-adding itself as due 1,000,000 times from "
    "its own run() runs each time at nesting depth 1, never inside add(), add_at() or "
    "reschedule(), one run per expiry pass") {
  for (const auto how :
       {Rearming::How::add, Rearming::How::add_at, Rearming::How::reschedule_then_add}) {
    const std::uint64_t times = how == Rearming::How::add ? kReadds : kReadds / 10;
    CAPTURE(static_cast<int>(how));
    ManualTimer m;
    Nesting nesting;
    auto task = make_task<Rearming>(m.timer, nesting, times, how);
    Nesting::adding([&] { m.timer.add(task, Nanos::zero()); });
    CHECK(nesting.runs == 0);
    std::uint64_t passes = 0;
    while (m.driver.advance_clock(Nanos::zero()))
      ++passes;
    CHECK(task->finished());
    CHECK(nesting.runs == times);
    CHECK(passes == times);  // each re-add waited for the next pass
    CHECK(nesting.deepest == 1);
    CHECK(nesting.inside_add == 0);
    CHECK(m.timer.size() == 0);
    CHECK(m.clock.now() == Nanos::zero());  // all at the same clock reading, none waited a tick
  }
}

TEST_CASE(
    "system_timer.hpp: a reaper-driven timer with InlineExecutor takes a task re-adding itself "
    "as due 1,000,000 times round its loop: depth 1, never inside add()") {
  SystemTimer timer(
      TimerOptions{.name = "rearming", .executor = std::make_shared<InlineExecutor>()});
  Nesting nesting;
  auto task = make_task<Rearming>(timer, nesting, kReadds, Rearming::How::add);
  Nesting::adding([&] { timer.add(task, Nanos::zero()); });
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  while (!task->finished() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(1ms);
  (void)timer.drain(10s);
  CHECK(task->finished());
  CHECK(nesting.runs == kReadds);
  CHECK(nesting.deepest == 1);
  CHECK(nesting.inside_add == 0);
}

TEST_CASE(
    "system_timer.hpp: at max_pending an add of any delay, <= 0 included, throws TimerRejected "
    "(pending_limit): size() never exceeds the limit, and a task moved between the due list and "
    "the "
    "wheel keeps its one unit, and gives it back when it runs, is cancelled or handed back") {
  ManualTimer m(1ms, 20, /*max_pending=*/1);
  auto a = make_task<CountingTask>();
  auto b = make_task<CountingTask>();
  m.timer.add(a, 1h);  // the one unit
  for (const Nanos delay : {Nanos::zero(), Nanos(-1ms), Nanos(1ms), Nanos(1h)}) {
    INFO("delay " << delay.count() << " ns");
    try {
      m.timer.add(b, delay);
      FAIL("an add past max_pending must throw");
    } catch (const TimerRejected& e) {
      CHECK(e.reason() == TimerRejected::Reason::pending_limit);
    }
    CHECK_THROWS_AS(m.timer.add_at(b, m.clock.now() + delay), TimerRejected);
    CHECK_FALSE(b->is_pending());
    CHECK(m.timer.size() == 1);
  }
  m.timer.add(a, Nanos::zero());  // moved from the wheel to the due list: still its one unit
  CHECK_THROWS_AS(m.timer.add(b, Nanos::zero()), TimerRejected);
  m.timer.add(a, 5ms);  // and back into the wheel
  CHECK_THROWS_AS(m.timer.add(b, 5ms), TimerRejected);
  CHECK(m.timer.size() == 1);
  m.timer.add(a, Nanos::zero());
  CHECK(a->cancel());  // cancelled while due: gives its unit back
  m.timer.add(b, Nanos::zero());
  CHECK_THROWS_AS(m.timer.add(a, 7ms), TimerRejected);
  m.advance(0ms);  // b runs from the due list: gives its unit back
  CHECK(b->runs == 1);
  for (int i = 0; i < 3; ++i) {  // the count is back to 0, not below: one unit, every time
    m.timer.add(a, i == 1 ? Nanos::zero() : 1ms);
    CHECK_THROWS_AS(m.timer.add(b, Nanos::zero()), TimerRejected);
    CHECK(m.timer.size() == 1);
    m.advance(1ms);
  }
  CHECK(a->runs == 3);
  m.timer.add(a, Nanos::zero());
  CHECK(m.timer.close().size() == 1);  // handed back: nothing left pending
  CHECK(m.timer.size() == 0);
}

// A fixed-rate periodic task whose every run moves the clock past its next deadlines: each run's
// end adds the next run when it is already due.
class Jumping final : public PeriodicTask {
 public:
  Jumping(ManualClock& clock, Nesting& nesting, Nanos jump)
      : clock_(clock), nesting_(nesting), jump_(jump) {}

 protected:
  void run_once() override {
    nesting_.enter();
    clock_.advance(jump_);
    Nesting::leave();
  }

 private:
  ManualClock& clock_;
  Nesting& nesting_;
  const Nanos jump_;
};

TEST_CASE(
    "system_timer.hpp: a periodic task under a clock that jumps past its next deadline while it "
    "runs, 1,000,000 runs under InlineExecutor: each at depth 1, one per expiry pass, never "
    "early") {
  ManualTimer m;
  Nesting nesting;
  auto task = make_task<Jumping>(m.clock, nesting, 3ms);  // 3 periods of 1 ms per run
  Nesting::adding([&] { task->start(m.timer, 1ms, 1ms, PeriodicTask::Mode::fixed_rate); });
  m.clock.advance(1ms);
  std::uint64_t passes = 0;
  while (task->run_count() < kReadds && m.driver.advance_clock(Nanos::zero()))
    ++passes;
  CHECK(task->cancel());  // between runs: the next one was pending
  CHECK(task->run_count() == kReadds);
  CHECK(passes == kReadds);
  CHECK(nesting.deepest == 1);
  CHECK(nesting.inside_add == 0);
  // Each run ends 3 ms after it began; the next one, due at its end, ran then, not later.
  CHECK(m.clock.now() == Nanos(1ms) + static_cast<std::int64_t>(kReadds) * Nanos(3ms));
}

TEST_CASE(
    "system_timer.hpp: a periodic task racing a thread that jumps the clock, on a reaper-driven "
    "timer with InlineExecutor: runs at depth 1, never inside add(), the schedule goes on") {
  ManualClock clock;
  SystemTimer timer(TimerOptions{
      .name = "jumping", .clock = &clock, .executor = std::make_shared<InlineExecutor>()});
  Nesting nesting;
  auto task = make_periodic([&] {
    nesting.enter();
    std::this_thread::yield();  // let the other thread's jumps land mid-run
    Nesting::leave();
  });
  task->start(timer, 0ms, 1ms, PeriodicTask::Mode::fixed_rate);
  const std::uint64_t target = kSanitized ? 500 : 2000;
  std::atomic<bool> stop{false};
  std::thread jumper([&] {
    std::uint64_t k = 0;
    while (!stop.load()) {
      clock.advance(++k % 7 == 0 ? 50ms : 1ms);  // mostly ticks, now and then a jump of 50 periods
      std::this_thread::yield();
    }
  });
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  while (task->run_count() < target && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(1ms);
  task->cancel();
  stop = true;
  jumper.join();
  (void)timer.close();
  CHECK(task->run_count() >= target);
  CHECK(nesting.deepest == 1);
  CHECK(nesting.inside_add == 0);
}

}  // namespace
