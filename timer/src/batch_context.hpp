// detail::BatchContext, private to the timer's sources: what a SystemTimer shares with the
// ExpiredBatches it hands out. The batches keep it alive: one may outlive its timer in an
// executor's queue.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <utility>

#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/executor.hpp"

namespace purgatory::detail {

struct BatchContext {
  BatchContext(TaskErrorHandler handler, bool single_thread_timer)
      : on_error(std::move(handler)), single_thread(single_thread_timer) {}

  const TaskErrorHandler on_error;
  // The timer is Concurrency::single_thread: its batches run on the thread that owns it, the only
  // one touching a queued task's state, so a claim is a load and a store.
  const bool single_thread;
  // Batches whose first task expired and that have not been run or dropped yet: counted once
  // per batch (at most SystemTimer::kMaxBatch tasks), not once per task.
  std::atomic<std::size_t> in_flight{0};
  // Some drain() waits for in_flight to reach 0: the batch that brings it there wakes the timer.
  std::atomic<bool> watched{false};
  std::mutex mu;
  int drainers = 0;              // guarded by mu: drain() calls waiting
  ClockWaiter* timer = nullptr;  // guarded by mu: the timer to wake (alive while drainers > 0)
};

}  // namespace purgatory::detail
