/// @file
/// TimerTask: what a user schedules on a SystemTimer.
///
/// The task is its own wheel entry (the Linux timer_list idea): it carries the links of the bucket
/// it sits in, so adding it allocates nothing, cancel() unlinks it in O(1) and rescheduling moves
/// it in place. Tasks are reference counted (Ref): the timer holds a reference while a task is
/// pending, so a caller may drop its own right after add(), and a running task is never destroyed
/// under its executor. docs/design.md explains the state word and the memory per task.
///
/// Two ways to write one:
/// @code
///   class Flush : public purgatory::TimerTask { void run() override { ... } };
///   auto flush = purgatory::make_task<Flush>();                      // Ref<Flush>
///   auto fired = purgatory::make_task([] { std::puts("fired"); });  // TaskRef
/// @endcode
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <concepts>

#include <boost/intrusive/list_hook.hpp>

#include "purgatory/timer/detail/task_pool.hpp"
#include "purgatory/timer/export.hpp"
#include "purgatory/timer/ref.hpp"

namespace purgatory {

class SystemTimer;
class ExpiredBatch;
namespace detail {
class TimerTaskList;
class TimingWheel;
struct TimerBase;
struct TimerAccess;
}  // namespace detail

/// What a user schedules on a SystemTimer: derive and override run(), or use make_task().
/// Thread-safe: cancel() and is_pending() may be called from any thread, including from the task's
/// own run(). A task belongs to at most one timer at a time.
class PURGATORY_TIMER_EXPORT TimerTask {
 public:
  TimerTask() = default;
  TimerTask(const TimerTask&) = delete;
  TimerTask& operator=(const TimerTask&) = delete;
  virtual ~TimerTask() = default;

  /// Stops the run that is pending. Returns true when this call stopped it: the task will not run
  /// for that schedule. Returns false when nothing was pending: never scheduled, already cancelled,
  /// or its run has already started (then the run completes normally). Exactly one of "the run
  /// happens" and "cancel() returned true" holds for every schedule. O(1).
  bool cancel() noexcept;

  /// True from add() until the run starts, is cancelled, or is handed back by close().
  [[nodiscard]] bool is_pending() const noexcept { return phase_of(state()) != kIdle; }

  /// References held (by Ref), the timer's included. For tests and diagnostics.
  [[nodiscard]] std::uint32_t use_count() const noexcept {
    return refs_of(word_.load(std::memory_order_relaxed));
  }

  /// Ref's hooks (found by argument-dependent lookup for every derived class).
  friend void intrusive_ptr_add_ref(const TimerTask* task) noexcept {
    task->word_.fetch_add(kOneRef, std::memory_order_relaxed);
  }
  /// Drops a reference; the last one deletes the task (the timer's, if it holds the last).
  friend void intrusive_ptr_release(const TimerTask* task) noexcept {
    if (refs_of(task->word_.fetch_sub(kOneRef, std::memory_order_acq_rel)) == 1) delete task;
  }

 protected:
  /// The work. Runs on the timer's executor, never before the deadline. An exception escaping it is
  /// caught and reported by the timer; the timer keeps running.
  virtual void run() = 0;

  /// Called at the start of every cancel(), before the pending run is looked at (PeriodicTask uses
  /// it to stop future runs even when cancel() meets a run in progress). Must not block for long.
  virtual void on_cancel() noexcept {}

 private:
  friend class SystemTimer;
  friend class ExpiredBatch;
  friend class detail::TimerTaskList;
  friend class detail::TimingWheel;
  friend struct detail::TimerAccess;

  // The timer's machinery (docs/design.md, "A task's state word"): word_ holds the state
  // (sequence << 2 | phase) in its high half and the reference count in its low half, so that one
  // atomic step changes both; place_ names the bucket or timer base holding the task.
  static constexpr std::uint32_t kIdle = 0;       // not in any timer
  static constexpr std::uint32_t kScheduled = 1;  // in a bucket or due list of its base
  static constexpr std::uint32_t kQueued = 2;     // expired; a job of an ExpiredBatch runs it
  static constexpr std::uint32_t phase_of(std::uint32_t s) noexcept { return s & 3U; }
  static constexpr std::uint32_t with_phase(std::uint32_t s, std::uint32_t p) noexcept {
    return (s & ~3U) | p;
  }
  static constexpr std::uint64_t kOneRef = 1;
  static constexpr std::uint32_t state_of(std::uint64_t w) noexcept {
    return static_cast<std::uint32_t>(w >> 32);
  }
  static constexpr std::uint32_t refs_of(std::uint64_t w) noexcept {
    return static_cast<std::uint32_t>(w);
  }
  static constexpr std::uint64_t make_word(std::uint32_t state, std::uint32_t refs) noexcept {
    return (std::uint64_t{state} << 32) | refs;
  }
  // What to add to word_ to move the state from `from` to `to`, references unchanged.
  static constexpr std::uint64_t state_delta(std::uint32_t from, std::uint32_t to) noexcept {
    return std::uint64_t{static_cast<std::uint32_t>(to - from)} << 32;
  }
  [[nodiscard]] std::uint32_t state() const noexcept {
    return state_of(word_.load(std::memory_order_acquire));
  }
  // place_'s tags: kRetired unless its base holds the task now; kBaseTag when it names a base.
  static constexpr std::uintptr_t kRetired = 1;
  static constexpr std::uintptr_t kBaseTag = 2;
  static constexpr std::uintptr_t kPlaceBits = kRetired | kBaseTag;
  [[nodiscard]] detail::TimerBase* holding_base() const noexcept;  // null while being stored
  [[nodiscard]] detail::TimerBase* last_base() const noexcept;     // null if never in a timer
  [[nodiscard]] static detail::TimerBase* base_of_place(std::uintptr_t place) noexcept;
  [[nodiscard]] detail::TimerTaskList* bucket() const noexcept {  // while linked
    return reinterpret_cast<detail::TimerTaskList*>(place_.load(std::memory_order_relaxed) &
                                                    ~kPlaceBits);
  }

  using Hook = boost::intrusive::list_member_hook<
      boost::intrusive::link_mode<boost::intrusive::auto_unlink>>;
  mutable std::atomic<std::uint64_t> word_{make_word(kIdle, 0)};
  Hook hook_;                    // guarded by its base's lock
  std::int64_t expiration_ = 0;  // wheel time of the run; guarded like hook_
  std::atomic<std::uintptr_t> place_{kRetired};
};

/// An owning reference to a task (what close() and drain() hand back).
using TaskRef = Ref<TimerTask>;

/// A class make_task<T>() can build: a TimerTask.
template <class T>
concept TimerTaskType = std::derived_from<T, TimerTask>;

/// A callable make_task() and make_periodic() can run: callable with no arguments.
template <class F>
concept TaskFunction = std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>;

/// Builds a task of type T (derived from TimerTask) and returns a reference to it.
template <TimerTaskType T, class... Args>
Ref<T> make_task(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...));
}

namespace detail {
// Gives a class the task pool's memory (detail/task_pool.hpp).
struct PoolAllocated {
  static void* operator new(std::size_t size) { return pool_allocate(size); }
  static void operator delete(void* block, std::size_t size) noexcept {
    pool_deallocate(block, size);
  }
};
struct HeapAllocated {};

// The task make_task(callable) builds: the callable stored inline, one allocation from the
// per-thread pool unless the callable is over-aligned.
template <class F>
class CallableTask final
    : public TimerTask,
      public std::conditional_t<(alignof(F) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__), PoolAllocated,
                                HeapAllocated> {
 public:
  explicit CallableTask(F f) : f_(std::move(f)) {}

 protected:
  void run() override { f_(); }

 private:
  F f_;
};
}  // namespace detail

/// make_task(callable): a task whose run calls `f`, no subclass needed. One allocation, from a
/// per-thread pool.
template <TaskFunction F>
TaskRef make_task(F&& f) {
  return TaskRef(new detail::CallableTask<std::decay_t<F>>(std::forward<F>(f)));
}

}  // namespace purgatory
