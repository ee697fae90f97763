/// @file
/// SystemTimer: Kafka's hierarchical timing wheel, with a driver, a clock and an executor.
///
/// @code
///   purgatory::SystemTimer timer;  // a reaper thread and an executor thread
///   auto flush = purgatory::make_task([] { std::puts("500 ms later"); });
///   timer.add(flush, std::chrono::milliseconds(500));
///   flush->cancel();  // true: it will not run
/// @endcode
///
/// On an Asio io_context, use AsioTimer (purgatory/timer/asio.hpp): the same timer, driven by
/// the io_context and running its tasks there, with no thread of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/executor.hpp"
#include "purgatory/timer/export.hpp"
#include "purgatory/timer/timer_options.hpp"
#include "purgatory/timer/timer_task.hpp"
#include "purgatory/timer/wheel_snapshot.hpp"

namespace purgatory {

/// Thrown by SystemTimer::add() when the timer does not accept the task.
class PURGATORY_TIMER_EXPORT TimerRejected : public std::runtime_error {
 public:
  /// Why the task was refused.
  enum class Reason {
    closed,         ///< close() was called
    draining,       ///< drain() is under way: no new tasks
    pending_limit,  ///< TimerOptions::max_pending tasks are pending already
  };
  /// `what` is the message what() returns (the timer's says which timer refused and why).
  TimerRejected(Reason reason, const std::string& what)
      : std::runtime_error(what), reason_(reason) {}
  /// Why the task was refused.
  [[nodiscard]] Reason reason() const noexcept { return reason_; }

 private:
  Reason reason_;
};

/// Kafka's SystemTimer: tasks run once, at or after their deadline, on the executor you pick.
///
/// A hierarchical timing wheel: add() and cancel() are O(1) and allocate nothing (the first task
/// needing a wheel level never used before allocates that level). Deadlines are rounded up to the
/// tick: a task never runs early, and runs within one tick of its deadline, executor delay aside.
/// The driver (the reaper thread, AsioTimer, or your own loop through an ExternalDriver) sleeps
/// until the next non-empty bucket: an idle timer makes no wake-ups. No task runs inside the call
/// that added it: one already due is expired by the driver's next pass (at once when it sleeps).
/// docs/design.md explains the wheel, the bases and the ahead-of-time cascade.
///
/// Thread-safe: any member from any thread, including a task's run(). No lock is held while a
/// task, the executor or a driver's wakeup runs. A timer made with
/// TimerOptions::Concurrency::single_thread is not: one thread makes every call (see there), and
/// add, cancel and expiry take no lock. Errors: std::invalid_argument naming the bad
/// value; TimerRejected when the timer refuses an add(). Out of memory a call throws std::bad_alloc
/// having changed nothing; no task is ever lost (close() and drain() never throw).
class PURGATORY_TIMER_EXPORT SystemTimer {
 public:
  /// Longest delay add() accepts: about 100 years, in every clock and tick configuration.
  static constexpr Nanos kMaxDelay = std::chrono::hours(24 * 365 * 100);
  /// Most tasks handed to the executor in one batch (the expiry releases its lock between them).
  static constexpr std::size_t kMaxBatch = 256;

  /// Throws std::invalid_argument for a tick outside (0, 1 day], a wheel_size outside [2, 65536],
  /// more than 1024 bases, or Concurrency::single_thread with the reaper thread or no executor.
  explicit SystemTimer(TimerOptions options = {});
  /// close(), dropping the handed-back tasks.
  virtual ~SystemTimer();
  SystemTimer(const SystemTimer&) = delete;
  SystemTimer& operator=(const SystemTimer&) = delete;

  /// Schedules `task` to run `delay` after now (<= 0: at the driver's next pass). A task already
  /// pending here moves to the new deadline and runs once. O(1). Throws std::invalid_argument for
  /// a null task, a delay above kMaxDelay or a task pending in another timer; TimerRejected when
  /// closed, draining or at max_pending.
  template <TimerTaskType T>
  void add(const Ref<T>& task, Nanos delay) {
    if (!task) throw std::invalid_argument("SystemTimer::add: task is null");
    add_task(*task, delay);
  }

  /// As add(), for a task that may run up to `slack` late (a request's timeout that tolerates a
  /// few percent): never before `delay` from now, at most `slack` after it (plus the tick and
  /// executor delay every task has). The deadline is rounded up to a multiple of the coarsest
  /// level tick (tick x wheel_size^k) that is at most half of `slack`, so it waits in a bucket of
  /// that level and runs from there, never cascaded to a finer one (Linux's timer wheel and ratas'
  /// schedule_in_range() trade exactness for the same). The other half is for the tasks rounded
  /// to the same bucket, which run together: an executor that keeps up runs a bucket's worth of
  /// them in less than its width, so each stays within its slack. A slack below twice tick x
  /// wheel_size changes nothing. Suited to long timeouts, which are rarely reached. Throws as
  /// add(), and std::invalid_argument for a negative slack.
  template <TimerTaskType T>
  void add(const Ref<T>& task, Nanos delay, Nanos slack) {
    if (!task) throw std::invalid_argument("SystemTimer::add: task is null");
    add_task(*task, delay, slack);
  }

  /// As add(), with an absolute deadline on clock(). It reads the clock only when it must (an
  /// empty wheel catches up with it), so a caller that knows the time saves the read. A deadline
  /// already passed runs at the driver's next pass.
  template <TimerTaskType T>
  void add_at(const Ref<T>& task, Nanos deadline) {
    if (!task) throw std::invalid_argument("SystemTimer::add_at: task is null");
    add_task_at(*task, deadline);
  }

  /// As add_at(), with a slack as add(task, delay, slack) takes it: the task runs no earlier than
  /// `deadline` and at most `slack` after it.
  template <TimerTaskType T>
  void add_at(const Ref<T>& task, Nanos deadline, Nanos slack) {
    if (!task) throw std::invalid_argument("SystemTimer::add_at: task is null");
    add_task_at(*task, deadline, slack);
  }

  /// Moves a pending task to `delay` from now, in place: O(1), no allocation (Linux mod_timer).
  /// True: it was pending here (in the wheel, or expired but not started) and now runs once, at
  /// the new deadline. False: it was not pending (never added, cancelled, or its run started) and
  /// nothing is scheduled. Throws as add() does; refused, a pending run is left as it was.
  bool reschedule(TimerTask& task, Nanos delay);

  /// Graceful stop: refuses new tasks (TimerRejected, Reason::draining), cancels periodic tasks,
  /// waits until every pending task has run (those already with the executor too) or `max_wait`
  /// has passed on clock(), then close()s. Returns the tasks not yet due when the wait ended.
  /// Advances the timer itself, so it works with any driver. Must not be called from a task, nor
  /// from a thread the executor needs (an AsioTimer's io_context thread): it would wait max_wait.
  std::vector<TaskRef> drain(Nanos max_wait = Nanos::max());

  /// Tasks pending in the wheels (every base, each read under its lock: exact while nothing
  /// changes), due ones not yet handed to the executor included.
  [[nodiscard]] std::size_t size() const;
  /// Tasks held per wheel level, finest first, over every base.
  [[nodiscard]] std::vector<std::size_t> size_per_level() const;
  /// Bytes the wheels hold (buckets and bitmaps of every level and base), tasks not included.
  [[nodiscard]] std::size_t wheel_memory_bytes() const;
  /// Clock time at which the earliest bucket is due (a time already reached while a task added
  /// when due waits for the next pass), if any task is scheduled.
  [[nodiscard]] std::optional<Nanos> next_expiration() const;
  /// Whether it was made with TimerOptions::Concurrency::single_thread.
  [[nodiscard]] bool single_thread() const noexcept { return single_thread_; }
  /// Number of timer bases.
  [[nodiscard]] std::size_t base_count() const noexcept { return bases_.size(); }

  /// Stops accepting tasks, stops the reaper thread, lets the executor finish what already
  /// expired, and hands back every task still scheduled (none runs; none is pending after).
  /// Idempotent: later calls return nothing. Must not be called from a task. Never throws.
  std::vector<TaskRef> close();
  /// Whether close() (or drain(), which ends with it) has been called.
  [[nodiscard]] bool is_closed() const;

  /// The clock deadlines are measured on (TimerOptions::clock).
  [[nodiscard]] const Clock& clock() const noexcept { return *clock_; }
  /// TimerOptions::tick.
  [[nodiscard]] Nanos tick() const noexcept { return tick_; }
  /// TimerOptions::name.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// How often a driver's wait (the reaper thread's, ExternalDriver::advance_clock() with a
  /// max_wait) woke up; an idle timer's count does not move.
  [[nodiscard]] std::uint64_t wakeups() const;

  /// What the wheels hold now, every base summed (see wheel_snapshot.hpp): tasks per level, and
  /// per bucket for the first `max_levels_with_buckets` levels. Reads counters under each base's
  /// lock in turn, no task, no user code; costs nothing when not called.
  [[nodiscard]] WheelSnapshot wheel_snapshot(int max_levels_with_buckets = 2) const;

 private:
  friend class TimerTask;
  friend struct detail::TimerAccess;

  // What each member is for, and the locks that guard them: system_timer.cpp.
  // Hears of a manual clock's jumps (and of the last batch a drain() waits for).
  struct ClockHook final : detail::ClockWaiter {
    explicit ClockHook(SystemTimer& t) noexcept : timer(t) {}
    void on_clock_advanced() noexcept override { timer.on_clock_advanced(); }
    SystemTimer& timer;
  };
  void on_clock_advanced() noexcept;
  // single_thread: without NDEBUG, aborts naming `call` unless on the owner (the first caller).
  void check_thread(const char* call) const noexcept;
  // The external driver's calls, through detail::TimerAccess (external_driver.hpp).
  void attach_driver(std::function<void()> wakeup);
  void detach_driver() noexcept;
  std::optional<Nanos> arm();
  bool advance_clock(Nanos max_wait);
  bool cancel_scheduled(TimerTask& task, detail::TimerBase& base, std::uintptr_t place) noexcept;
  [[nodiscard]] std::int64_t expiration_for(std::int64_t now, std::int64_t delay) const;
  [[nodiscard]] std::int64_t with_slack(std::int64_t expiration, Nanos slack) const;
  bool schedule(TimerTask& task, std::int64_t now, std::int64_t expiration, bool only_if_pending,
                std::int64_t deadline = 0);
  // schedule()'s steps (system_timer.cpp).
  enum class Claim { won, lost, run_started };
  [[nodiscard]] bool owns(const detail::TimerBase* b) const noexcept;
  [[nodiscard]] detail::TimerBase* base_for(const TimerTask& task) const noexcept;
  void check_accepting(std::int64_t now, std::int64_t expiration, std::int64_t deadline,
                       const detail::TimerBase& base) const;
  void catch_up(detail::TimingWheel& wheel, std::int64_t now) const noexcept;
  void take_unit();
  void give_back_unit() noexcept;
  void unlink_scheduled(TimerTask& task, detail::TimerBase& base) const noexcept;
  Claim claim(TimerTask& task, detail::TimerBase& base, std::uint64_t word,
              bool only_if_pending) noexcept;
  bool place(TimerTask& task, detail::TimerBase& base, std::int64_t expiration,
             bool enters_wheel) noexcept;
  bool advance(Nanos max_wait, bool stop_when_drained, const std::int64_t* deadline = nullptr);
  void add_task(TimerTask& task, Nanos delay);
  void add_task_at(TimerTask& task, Nanos deadline);
  void add_task(TimerTask& task, Nanos delay, Nanos slack);
  void add_task_at(TimerTask& task, Nanos deadline, Nanos slack);
  [[nodiscard]] std::int64_t expiration_at(Nanos deadline) const;
  void queue_expired(TimerTask& task, ExpiredBatch& batch) noexcept;
  void prepare_batch(ExpiredBatch& batch, std::size_t tasks) const;
  void hand_off(ExpiredBatch& batch) noexcept;
  void call_wakeup_hook() noexcept;
  void cancel_periodic_tasks();
  [[nodiscard]] bool drained() const;
  void hand_back_all(detail::TimerBase& base, std::vector<TaskRef>& out) noexcept;
  static void retire_base(TimerTask& task) noexcept {
    task.place_.store(task.place_.load(std::memory_order_relaxed) | TimerTask::kRetired,
                      std::memory_order_relaxed);
  }
  bool service(std::int64_t now);
  bool expire_due(detail::TimerBase& base, std::int64_t now, ExpiredBatch& batch);
  [[nodiscard]] std::optional<std::int64_t> next_wake(std::int64_t now) const;
  [[nodiscard]] std::size_t total_pending() const;
  detail::TimerBase& my_base() const noexcept;
  void wake_drivers();
  void recompute_armed_locked() noexcept;
  void reaper_loop();

  const std::string name_;
  const Clock* const clock_;
  const Nanos tick_;
  const std::size_t max_pending_;
  std::shared_ptr<Executor> executor_;
  bool owns_executor_ = false;
  std::shared_ptr<detail::BatchContext> batches_;
  std::vector<std::unique_ptr<detail::TimerBase>> bases_;
  std::size_t base_mask_ = 0;
  std::atomic<bool> closed_{false};
  std::atomic<bool> draining_{false};
  std::atomic<std::size_t> limited_pending_{0};
  mutable std::mutex drive_mu_;
  std::condition_variable cv_;
  std::atomic<std::int64_t> armed_;
  std::vector<std::int64_t> sleeping_until_;
  std::int64_t external_until_;
  std::uint64_t wake_requests_ = 0;
  std::uint64_t wakeups_ = 0;
  const bool external_;
  std::function<void()> wakeup_hook_;  // set by attach_driver(), read while driver_attached_
  std::atomic<bool> driver_attached_{false};
  std::atomic<std::uint32_t> hook_calls_{0};  // calls of wakeup_hook_ under way
  std::atomic<std::uint32_t> next_start_{0};
  ClockHook clock_hook_{*this};
  std::thread reaper_;
  const std::int64_t wheel_size_;
  const bool single_thread_;
  mutable std::atomic<std::thread::id> owner_{};  // single_thread, without NDEBUG: who calls
};

}  // namespace purgatory
