/// @file
/// SystemTimer: a hierarchical timing wheel with a driver, a clock and an executor.
///
/// Kafka's SystemTimer, rebuilt for C++ servers:
///   - add() and cancel() are O(1) and allocate nothing (the task is its own wheel entry); the
///     exceptions are the first task that needs a wheel level never used before, and a task due
///     at once, which is handed to the executor in a batch;
///   - a task never runs before its deadline: deadlines are rounded *up* to the tick, so a task
///     runs at most one tick (plus executor delay) after it is due;
///   - the clock jumps straight to the next non-empty bucket; with nothing pending the driver
///     sleeps without any wake-up (Kafka's reaper polls 5 times a second, Netty's ticks);
///   - the clock is injected (SteadyClock, or ManualClock in tests);
///   - expired tasks run on the executor of your choice (a dedicated thread by default);
///   - the clock is driven by the timer's own reaper thread, or by you calling advance_clock()
///     (tests, or AsioDriver in purgatory/timer/asio.hpp, which needs no extra thread);
///   - adds and cancels from different threads do not meet on one lock: the timer keeps several
///     bases (each a wheel and its lock, Linux's per-CPU timer bases), a thread adds to its own,
///     and the one driver sleeps until the earliest deadline over all of them;
///   - a burst does not stall expiry: coarse buckets are cascaded ahead of time, a slice per tick,
///     between expiries (see timing_wheel.hpp), never as one long critical section.
///
/// @code
///   purgatory::SystemTimer timer;                                   // reaper + executor threads
///   auto task = purgatory::make_task([] { std::puts("500 ms later"); });
///   timer.add(task, std::chrono::milliseconds(500));
///   task->cancel();                                                 // true: it will not run
/// @endcode
///
/// Errors: invalid arguments throw std::invalid_argument naming the value; an add() the timer
/// refuses (closed, draining, over max_pending) throws TimerRejected.
///
/// Out of memory (std::bad_alloc from operator new or the task pool) never leaves a task half
/// scheduled, and never loses one. What may allocate, and what happens then:
///   - the constructor: throws, and nothing was started;
///   - add(), add_at(), reschedule(): a task needing a wheel level never used before, or due at
///     once (it needs a batch for the executor); the call throws before changing anything;
///   - advance_clock(): a batch for the executor; it throws, having handed over whole batches
///     only: what it did not take stays scheduled for the next pass. The reaper thread reports
///     that to stderr and tries again 1 ms later;
///   - drain() never throws: out of memory it keeps trying until max_wait, and hands back what it
///     could not expire; close() never throws: the tasks it has no room to return are handed back
///     all the same, by dropping the timer's reference (as the destructor does);
///   - wheel_snapshot(), size_per_level(): throw, changing nothing.
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
#include "purgatory/timer/timer_task.hpp"
#include "purgatory/timer/timing_wheel.hpp"
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

/// How a SystemTimer is built. A plain value; the defaults are Kafka's.
struct TimerOptions {
  /// Who advances the clock.
  enum class Driver {
    reaper_thread,  ///< the timer owns a thread that sleeps until the next bucket (Kafka's reaper)
    external,       ///< someone else calls advance_clock(): a test, or AsioDriver
  };

  std::string name = "timer";  ///< names the threads ("reaper-<name>") and error reports
  Nanos tick = std::chrono::milliseconds(1);  ///< width of a bucket of the finest level
  int wheel_size = 20;                        ///< Kafka's defaults: 1 ms x 20 slots per level
  const Clock* clock = nullptr;           ///< null: SteadyClock::instance(); must outlive the timer
  std::shared_ptr<Executor> executor{};   ///< null: a ThreadExecutor owned by the timer
  Driver driver = Driver::reaper_thread;  ///< who advances the clock
  std::size_t max_pending = 0;            ///< 0: unlimited; else add() past it throws TimerRejected
  TaskErrorHandler on_task_error{};       ///< null: print the error to stderr
  /// Timer bases (each its own wheel and lock); a thread adds to base (its slot % bases). Rounded
  /// up to a power of two (3 gives 4: the base is the slot's low bits), at most 1024. 0: one per
  /// hardware thread, at most 64, rounded up likewise.
  std::size_t bases = 0;
};

/// Kafka's SystemTimer: a hierarchical timing wheel with a driver, a clock and an executor.
/// Thread-safe: every member function may be called from any thread, including from a task's
/// run(), except that advance_clock() must not be called from a task running on an
/// InlineExecutor inside advance_clock() (it would not deadlock, but time would run re-entrantly).
/// No lock is held while a task runs or while the executor is called.
class PURGATORY_TIMER_EXPORT SystemTimer final : private ClockWaiter {
 public:
  /// Longest delay add() accepts: about 100 years, in every clock and tick configuration.
  static constexpr Nanos kMaxDelay = std::chrono::hours(24 * 365 * 100);
  /// Most tasks handed to the executor in one batch: advance_clock() expires in batches of this
  /// size, releasing its lock between them, so an add() never waits behind a huge expiry and an
  /// inline executor runs each task while it is still in cache.
  static constexpr std::size_t kMaxBatch = 256;

  /// Throws std::invalid_argument for tick <= 0 or above one day, a wheel_size outside
  /// [2, TimingWheel::kMaxWheelSize], or more than 1024 bases.
  explicit SystemTimer(TimerOptions options = {});
  /// close(), dropping the handed-back tasks.
  ~SystemTimer();
  SystemTimer(const SystemTimer&) = delete;
  SystemTimer& operator=(const SystemTimer&) = delete;

  /// Schedules `task` to run `delay` after now. A delay <= 0 hands it to the executor at once.
  /// If the task is already pending here it is moved to the new deadline (it runs once). O(1).
  /// Throws std::invalid_argument for a null task, a delay above kMaxDelay, or a task pending in
  /// another timer; TimerRejected when closed or at max_pending.
  template <class T>
  requires std::is_base_of_v<TimerTask, T>
  void add(const boost::intrusive_ptr<T>& task, Nanos delay) {
    if (!task) throw std::invalid_argument("SystemTimer::add: task is null");
    add_task(*task, delay);
  }

  /// As add(), with an absolute deadline on clock(). Reads the clock only when the wheel is empty
  /// (to catch up with it) or when the deadline is more than kMaxDelay after the wheel's time (to
  /// judge it against the clock), so a caller that already knows the time saves the read. A
  /// deadline already passed runs at the next expiry pass (at once when a driver is waiting).
  template <class T>
  requires std::is_base_of_v<TimerTask, T>
  void add_at(const boost::intrusive_ptr<T>& task, Nanos deadline) {
    if (!task) throw std::invalid_argument("SystemTimer::add_at: task is null");
    add_task_at(*task, deadline);
  }

  /// Moves a pending task to `delay` from now, in place: O(1), no allocation, no reference count
  /// traffic (Linux mod_timer, tokio's reset). Returns true when the task was pending here (in the
  /// wheel, or expired but not yet started) and will now run once, at the new deadline; false when
  /// it was not pending (never added, cancelled, or its run already started: then it ran at the
  /// old deadline) and nothing is scheduled. Throws as add() does: std::invalid_argument for a bad
  /// delay or a task pending in another timer; TimerRejected when the timer is closed or draining,
  /// or at max_pending when an expired task not yet started must go back into the wheel (its
  /// pending run is then left as it was).
  bool reschedule(TimerTask& task, Nanos delay);

  /// Graceful stop. Stops accepting tasks (add() then throws TimerRejected with Reason::draining),
  /// cancels periodic tasks, then waits until every pending task has run, at most `max_wait` on
  /// clock(); then close(). "Has run" includes the tasks already handed to the executor, whichever
  /// it is (the timer's own, or one given in TimerOptions: a ThreadExecutor, an AsioExecutor, a
  /// pool): drain() returns once their run() returned, or once max_wait has passed (then those
  /// still with the executor run when it gets to them, after drain() returned). Returns the tasks
  /// handed back because they were not due when the wait ended (none when everything ran). The
  /// clock must keep moving: drain() advances the timer itself, so it works with any driver. Must
  /// not be called from a task, nor from a thread the executor needs to run tasks (the thread
  /// running an AsioExecutor's io_context): the wait would last max_wait.
  std::vector<TaskRef> drain(Nanos max_wait = Nanos::max());

  /// Kafka's advanceClock: waits up to `max_wait` for the earliest bucket to become due, then
  /// expires every task due by now and hands them to the executor. Returns whether any bucket was
  /// due. max_wait <= 0 never blocks; Nanos::max() waits until something is due or close().
  /// While it waits it also wakes to cascade coarse buckets ahead of time (see the top), and it
  /// re-reads the clock as it goes, so a long expiry also takes what fell due meanwhile.
  bool advance_clock(Nanos max_wait);

  /// Tasks in the wheels (scheduled, not yet expired), over every base. Each base is read under
  /// its lock, one after another: exact while nothing changes.
  [[nodiscard]] std::size_t size() const;
  /// Tasks held per wheel level, finest first, over every base.
  [[nodiscard]] std::vector<std::size_t> size_per_level() const;
  /// Bytes the wheels themselves hold (buckets and bitmaps of every level of every base), tasks
  /// not included.
  [[nodiscard]] std::size_t wheel_memory_bytes() const;
  /// Clock time at which the earliest bucket is due, if any task is scheduled.
  [[nodiscard]] std::optional<Nanos> next_expiration() const;
  /// Number of timer bases.
  [[nodiscard]] std::size_t base_count() const noexcept { return bases_.size(); }

  /// Stops accepting tasks, stops the reaper thread, lets the executor finish tasks that already
  /// expired, and hands back every task still scheduled (none runs; each is no longer pending).
  /// Idempotent; later calls return an empty vector. Must not be called from a task. Never throws
  /// (see "Out of memory" at the top). An add() that already held a base's lock when close()
  /// began may still link its task; close() then hands it back with the others.
  std::vector<TaskRef> close();
  /// Whether close() (or drain(), which ends with it) has been called.
  [[nodiscard]] bool is_closed() const;

  /// The clock deadlines are measured on (TimerOptions::clock).
  [[nodiscard]] const Clock& clock() const noexcept { return *clock_; }
  /// The width of a finest-level bucket (TimerOptions::tick): a task runs within one tick of its
  /// deadline, never before it.
  [[nodiscard]] Nanos tick() const noexcept { return tick_; }
  /// TimerOptions::name.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

  /// How many times a thread waiting in advance_clock() woke up (for any reason). An idle timer's
  /// count does not move: that is the "no wake-ups when idle" guarantee, tested.
  [[nodiscard]] std::uint64_t wakeups() const;

  /// For external drivers: called (with no lock held) whenever an add() makes a task due before
  /// the instant last returned by arm(). At most one hook; set it before tasks are added. Must not
  /// throw: an exception escaping it is printed to stderr (naming the timer) and the call that
  /// ran it goes on (the add stands); the driver then wakes at the instant arm() last returned.
  void set_wakeup_hook(std::function<void()> hook);
  /// For external drivers: returns the instant to sleep until (the earliest bucket, or the next
  /// step of an ahead-of-time cascade) and remembers it, so that add() calls the wakeup hook only
  /// when something earlier arrives. None: nothing is pending.
  std::optional<Nanos> arm();

  /// What the wheels hold now, every base summed: tasks per level, and per bucket for the first
  /// `max_levels_with_buckets` levels (wheel_size counts each), the wheel time and the next
  /// expiration. Copies a few counters under each base's lock in turn (so counts taken while tasks
  /// are added can be a moment apart across bases), O(bases * levels * wheel_size); reads no task
  /// and calls no user code; costs nothing when not called. See wheel_snapshot.hpp.
  [[nodiscard]] WheelSnapshot wheel_snapshot(int max_levels_with_buckets = 2) const;

 private:
  friend class TimerTask;

  void on_clock_advanced() noexcept override;
  // Cancels a task scheduled in `base`, at `place` (its TimerTask::place_ as read before). Returns
  // whether it was still there (false too if it moved meanwhile, even within `base`).
  bool cancel_scheduled(TimerTask& task, detail::TimerBase& base, std::uintptr_t place) noexcept;
  // Deadline (clock time) -> wheel expiration, rounded up to the tick; -1 when due at `now`.
  [[nodiscard]] std::int64_t expiration_for(std::int64_t now, std::int64_t delay) const;
  // add()/reschedule(): links `task` for `expiration` (-1: run at once). With only_if_pending, an
  // idle task is left alone and false returned. `deadline`: add_at()'s unrounded deadline (for
  // the maximum-delay check when now is unknown).
  bool schedule(TimerTask& task, std::int64_t now, std::int64_t expiration, bool only_if_pending,
                std::int64_t deadline = 0);
  // `deadline` (absolute, on the clock), if given, is the end of the wait instead of now +
  // max_wait: drain() passes its own, so that the wait does not end later than drain's by the
  // time between the two clock reads (with a manual clock that stops there, it never ended).
  bool advance(Nanos max_wait, bool stop_when_drained, const std::int64_t* deadline = nullptr);
  void add_task(TimerTask& task, Nanos delay);
  void add_task_at(TimerTask& task, Nanos deadline);
  // Marks `task` (holding one timer reference, adopted by the batch) as queued, into `batch`,
  // which prepare_batch() gave room for it.
  void queue_expired(TimerTask& task, ExpiredBatch& batch) noexcept;
  // Gives `batch` room for `tasks` jobs (allocating, so before anything it will hold changes).
  void prepare_batch(ExpiredBatch& batch, std::size_t tasks) const;
  // Hands `batch` to the executor; if execute() throws, reports it and runs what it left here.
  void hand_off(ExpiredBatch& batch) noexcept;
  // Calls the wakeup hook, if any; reports what it throws.
  void call_wakeup_hook() noexcept;
  // drain(): cancels the periodic tasks in the wheels, a base at a time.
  void cancel_periodic_tasks();
  // drain(): nothing in the wheels, and no batch with the executor.
  [[nodiscard]] bool drained() const;
  // close(): hands back every task of `base` into `out` (those it has no room for: dropped).
  void hand_back_all(detail::TimerBase& base, std::vector<TaskRef>& out) noexcept;
  // Before a scheduled task leaves that state (under its base's lock): its base becomes the last
  // one, so that a reader who sees the task scheduled again waits for the next add's store.
  static void retire_base(TimerTask& task) noexcept {
    task.place_.store(task.place_.load(std::memory_order_relaxed) | TimerTask::kRetired,
                      std::memory_order_relaxed);
  }
  // Expires what is due at `now` in every base, a batch per base in turn, and cascades ahead of
  // time between batches. Returns whether anything was due.
  bool service(std::int64_t now);
  // Requires base.mu. Moves up to kMaxBatch tasks due at `now` into `batch`, cascading due
  // coarse buckets on the way (a bounded number of moves). Returns true when nothing due is left.
  bool expire_due(detail::TimerBase& base, std::int64_t now, ExpiredBatch& batch);
  // The earliest instant a driver must act at: a bucket due or a cascade step. Locks each base.
  [[nodiscard]] std::optional<std::int64_t> next_wake(std::int64_t now) const;
  [[nodiscard]] std::size_t total_pending() const;
  detail::TimerBase& my_base() const noexcept;
  // Wakes sleeping drivers and the external driver's hook: an add() made a task due before what
  // they wait for.
  void wake_drivers();
  // Requires drive_mu_: the earliest instant any driver waits for.
  void recompute_armed_locked() noexcept;
  void reaper_loop();

  const std::string name_;
  const Clock* const clock_;
  const Nanos tick_;
  const std::size_t max_pending_;
  std::shared_ptr<Executor> executor_;
  bool owns_executor_ = false;
  std::shared_ptr<detail::BatchContext> batches_;  // shared with the batches handed out

  std::vector<std::unique_ptr<detail::TimerBase>> bases_;  // fixed after construction
  std::size_t base_mask_ = 0;
  // Set by close() and drain() before they visit the bases one at a time, each under its lock:
  // an add() holding a base's lock when the flag was set links its task before the visit (which
  // finds it), every later holder of that lock sees the flag. Read anywhere.
  std::atomic<bool> closed_{false};
  std::atomic<bool> draining_{false};
  // Tasks in the wheels, kept only when max_pending is set (an exact limit across bases).
  std::atomic<std::size_t> limited_pending_{0};

  // The drivers' side.
  mutable std::mutex drive_mu_;
  std::condition_variable cv_;  // advance_clock() waiters sleep here
  // Earliest instant a sleeping advance_clock() or an external driver waits for: an add() due
  // before it wakes them. kNobody while nobody sleeps. Written under drive_mu_.
  std::atomic<std::int64_t> armed_;
  std::vector<std::int64_t> sleeping_until_;  // guarded by drive_mu_: one per sleeping driver
  std::int64_t external_until_;               // guarded by drive_mu_: what arm() returned
  std::uint64_t wake_requests_ = 0;           // guarded by drive_mu_
  std::uint64_t wakeups_ = 0;                 // guarded by drive_mu_
  std::function<void()> wakeup_hook_;         // set before use
  std::atomic<std::uint32_t> next_start_{0};  // service(): which base goes first
  std::thread reaper_;
};

}  // namespace purgatory
