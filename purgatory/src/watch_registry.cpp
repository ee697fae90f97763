#include "purgatory/detail/purgatory_state.hpp"

#include "purgatory/detail/operation_access.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <utility>

#include "platform/atomic_wait.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "purgatory/timer/detail/task_pool.hpp"

#include <fmt/core.h>

namespace purgatory::detail {

namespace {

// The callbacks running on this thread now, innermost first (RunningFinish). Trivially
// destructible: the records live on the running frames.
thread_local RunningFinish* t_running = nullptr;

// A shutdown() waiting for callbacks sleeps on g_finish_epoch; a finishing thread bumps it only
// while some shutdown() waits (g_shutdowns_waiting). Process-wide and never destroyed, so a
// finishing thread may touch them after the purgatory's state is gone.
std::atomic<std::uint32_t> g_shutdowns_waiting{0};
std::atomic<std::uint32_t> g_finish_epoch{0};

// After a finishing thread's (sequentially consistent) increment of its `done` count: wakes the
// shutdowns waiting, if any. Either such a shutdown() registered before this load (and is woken),
// or its own check of `done`, after it registered, sees the increment.
void wake_waiting_shutdowns() noexcept {
  if (g_shutdowns_waiting.load() == 0) return;
  g_finish_epoch.fetch_add(1);
  platform::wake_all(g_finish_epoch);
}

}  // namespace

// ---- ExtraWatchNodes --------------------------------------------------------------------------

std::size_t ExtraWatchNodes::bytes_for(std::uint32_t count) noexcept {
  static_assert(sizeof(ExtraWatchNodes) % alignof(ExtraWatchNode) == 0);
  return sizeof(ExtraWatchNodes) + std::size_t{count} * sizeof(ExtraWatchNode);
}

ExtraWatchNode* ExtraWatchNodes::first() noexcept {
  return std::launder(
      reinterpret_cast<ExtraWatchNode*>(reinterpret_cast<char*>(this) + sizeof(ExtraWatchNodes)));
}

ExtraWatchNodes* ExtraWatchNodes::create(DelayedOperation& op, std::uint32_t count) {
  void* block = pool_allocate(bytes_for(count));
  auto* nodes = new (block) ExtraWatchNodes(count);
  char* at = static_cast<char*>(block) + sizeof(ExtraWatchNodes);
  for (std::uint32_t i = 0; i < count; ++i, at += sizeof(ExtraWatchNode)) {
    new (at) ExtraWatchNode{{}, &op};
  }
  return nodes;
}

void ExtraWatchNodes::destroy(ExtraWatchNodes* nodes) noexcept {
  const std::uint32_t count = nodes->count_;
  for (std::uint32_t i = 0; i < count; ++i)
    (*nodes)[i].~ExtraWatchNode();
  nodes->~ExtraWatchNodes();
  pool_deallocate(nodes, bytes_for(count));
}

// ---- PurgatoryState ---------------------------------------------------------------------------

PurgatoryState::PurgatoryState(std::string name, CallbackErrorHandler on_error, const Clock& clock,
                               std::size_t slots)
    : name_(std::move(name)),
      on_error_(std::move(on_error)),
      clock_(&clock),
      slots_(slots),
      finishing_(std::make_unique<Finishing[]>(slots)) {}

void PurgatoryState::finish_started(RunningFinish& running, std::uint32_t slot) noexcept {
  enter_finishing(running, slot);
}

void PurgatoryState::finished(RunningFinish& running) noexcept {
  leave_finishing(running);
}

std::uint32_t PurgatoryState::hold_error(DelayedOperation& op) noexcept {
  // Watched, so every node is linked: the first one's shard, as for a decision (unwatch()).
  const std::uint32_t slot = list_of(OperationAccess::node(op, 0))->shard;
  finishing_[slot].held.fetch_add(1);
  return slot;
}

void PurgatoryState::report_held_error(const DelayedOperation& op, std::uint32_t slot,
                                       std::exception_ptr error, std::string_view where) noexcept {
  RunningFinish running;
  enter_finishing(running, slot);
  report_error(op, std::move(error), where);
  leave_finishing(running);
}

void PurgatoryState::enter_finishing(RunningFinish& running, std::uint32_t slot) noexcept {
  running.registry = this;
  running.slot = slot;
  running.outer = t_running;
  t_running = &running;
}

void PurgatoryState::leave_finishing(RunningFinish& running) noexcept {
  t_running = running.outer;
  finishing_[running.slot].done.fetch_add(1);  // the last access to *this (see the class)
  PURGATORY_RACE_POINT("PurgatoryState::leave_finishing: counted, before waking a shutdown");
  wake_waiting_shutdowns();
}

void PurgatoryState::wait_finished(const std::uint64_t* decided) noexcept {
  // Callbacks of ours running on this thread (we are called from one of them): not waited for,
  // and they keep this state alive, since the purgatory may be destroyed before they end.
  for (RunningFinish* r = t_running; r != nullptr; r = r->outer) {
    if (r->registry == this && !r->keep) r->keep.reset(this);
  }
  g_shutdowns_waiting.fetch_add(1);
  for (std::size_t slot = 0; slot < slots_; ++slot) {
    std::uint64_t own = 0;
    for (const RunningFinish* r = t_running; r != nullptr; r = r->outer) {
      if (r->registry == this && r->slot == slot) ++own;
    }
    for (;;) {
      const std::uint32_t epoch = g_finish_epoch.load();
      PURGATORY_RACE_POINT("PurgatoryState::wait_finished: epoch read, before the counts");
      const std::uint64_t expected = decided[slot] + finishing_[slot].held.load();
      if (finishing_[slot].done.load() + own >= expected) break;
      platform::wait_while_equal(g_finish_epoch, epoch, std::memory_order_seq_cst);
    }
  }
  g_shutdowns_waiting.fetch_sub(1);
}

void PurgatoryState::report_error(const DelayedOperation& op, std::exception_ptr error,
                                  std::string_view where) noexcept {
  if (on_error_) {
    try {
      on_error_(op, error, where);
    } catch (...) {
      fmt::print(stderr, "purgatory '{}': the callback error handler threw\n", name_);
    }
    return;
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    fmt::print(stderr, "purgatory '{}': DelayedOperation::{} threw: {}\n", name_, where, e.what());
  } catch (...) {
    fmt::print(stderr, "purgatory '{}': DelayedOperation::{} threw a non-std exception\n", name_,
               where);
  }
}

void PurgatoryState::record_wait(Nanos since) noexcept {
  waited_.record(clock_->now() - since);
}

void PurgatoryState::account_unwatched_completion() noexcept {
  completed_unwatched_.fetch_add(1, std::memory_order_relaxed);
  waited_.record(Nanos::zero());
}

void PurgatoryState::fill(PurgatoryMetrics& m) const {
  m.name = name_;
  m.completed_total = completed_unwatched_.load(std::memory_order_relaxed);
  m.waited = waited_.summary();
  m.waited_histogram = waited_.snapshot();
}

}  // namespace purgatory::detail
