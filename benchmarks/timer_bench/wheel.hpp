// Wheel: ours, purgatory::SystemTimer, as the brief configures it: an external driver
// (ExternalDriver::advance_clock()), tasks run inline (InlineExecutor), SteadyClock, the default
// tick and wheel size (1 ms x 20 slots per level). WheelSingleThread: the same timer made with
// TimerOptions::Concurrency::single_thread (no lock, no atomic read-modify-write of a task's
// state), as a server's one event-loop thread would own it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/ref.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "timer_under_test.hpp"

namespace timer_bench {
namespace {

template <purgatory::TimerOptions::Concurrency kConcurrency>
class BasicWheelImpl {
 public:
  explicit BasicWheelImpl(std::size_t n) : timer_(options()) {
    tasks_.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      tasks_.push_back(purgatory::make_task<Task>());
  }
  void add(std::size_t i, Nanos delay) { timer_.add(tasks_[i], delay); }
  void add_at(std::size_t i, std::int64_t deadline) { timer_.add_at(tasks_[i], Nanos{deadline}); }
  bool cancel(std::size_t i) { return tasks_[i]->cancel(); }
  bool reschedule(std::size_t i, Nanos delay) { return timer_.reschedule(*tasks_[i], delay); }
  void expire_due() { driver_.advance_clock(); }
  [[nodiscard]] std::uint64_t runs(std::size_t i) const { return tasks_[i]->payload.runs; }
  template <class Body>
  void loop(benchmark::State& state, Body& body) {
    plain_loop(state, body);
  }
  // What the library holds for `pending` scheduled tasks beyond the user's own members.
  [[nodiscard]] double library_bytes_per_task(std::size_t pending) const {
    return static_cast<double>(sizeof(purgatory::TimerTask)) +
           static_cast<double>(timer_.wheel_memory_bytes()) / static_cast<double>(pending);
  }

 private:
  // The brief's configuration: driven by an ExternalDriver, tasks run inline, defaults otherwise.
  static purgatory::TimerOptions options() {
    purgatory::TimerOptions o;
    o.executor = std::make_shared<purgatory::InlineExecutor>();
    o.driver = purgatory::TimerOptions::Driver::external;
    o.concurrency = kConcurrency;
    return o;
  }
  struct Task final : purgatory::TimerTask {
    Payload payload;
    void run() override { payload(); }
  };
  purgatory::SystemTimer timer_;
  purgatory::ExternalDriver driver_{timer_};
  std::vector<purgatory::Ref<Task>> tasks_;
};

using WheelImpl = BasicWheelImpl<purgatory::TimerOptions::Concurrency::thread_safe>;
using WheelSingleThreadImpl = BasicWheelImpl<purgatory::TimerOptions::Concurrency::single_thread>;
static_assert(TimerUnderTest<WheelImpl>);
static_assert(TimerUnderTest<WheelSingleThreadImpl>);

}  // namespace
}  // namespace timer_bench
