/// @file
/// ExternalDriver: a SystemTimer driven from your own event loop (epoll, poll, kqueue, a game
/// loop), with no thread of its own.
///
/// @code
///   purgatory::SystemTimer timer({.executor = std::make_shared<purgatory::InlineExecutor>(),
///                                 .driver = purgatory::TimerOptions::Driver::external});
///   purgatory::ExternalDriver driver(timer, [fd] { eventfd_write(fd, 1); });  // fd in the set
///   for (;;) {
///     const int n = epoll_wait(ep, events, 64, driver.timeout_ms());  // -1: nothing pending
///     // ... the ready descriptors: the eventfd is read (emptied); handlers add and cancel ...
///     driver.advance_clock();  // every task due now runs here, on this thread
///   }
/// @endcode
///
/// examples/epoll_loop.cpp is a complete server built this way.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/export.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory {

class AsioTimer;

/// Drives a SystemTimer made with TimerOptions::Driver::external from a loop you own. The loop
/// asks when to wake (arm(), or timeout_ms() for poll-style waits), sleeps in its own wait
/// (epoll_wait, a condition variable, a frame), then makes an expiry pass (advance_clock()), which
/// hands every task due by then to the timer's executor (with an InlineExecutor they run right
/// there, on the loop's thread). Nothing ticks while nothing is due.
///
/// The protocol, on the loop's thread, once per iteration:
///   1. arm() (or timeout_ms()): the instant to wake at, remembered by the timer;
///   2. sleep until then, or until `wakeup` is called, or until your own I/O is ready; then
///      handle that I/O (its handlers may add and cancel tasks: they are seen at step 1);
///   3. advance_clock(): the due tasks, in deadline order, batch by batch.
/// Any thread may meanwhile add() and cancel() tasks. When an add() makes a task due before the
/// instant the last arm() returned (or a cancel() empties a timer base, so the loop may sleep
/// longer), the timer calls `wakeup`, on the thread that made the call, with no lock held: the
/// loop's own thread too (a handler's add, a task's add inside advance_clock()), which costs one
/// spare iteration. `wakeup` may come between step 1 and the sleep, so it must leave a state the
/// sleep sees when it begins: write to an eventfd or pipe the wait watches (a flag the wait
/// cannot watch would be missed there). Empty it when the wait reports it, before the next step
/// 1: emptied after step 1, a wakeup in between would be lost. A loop that adds and cancels only
/// on its own thread, or never sleeps past a task's deadline, needs no `wakeup`.
///
/// One driver per timer, for its whole life or until the driver is destroyed; `wakeup` is fixed
/// at construction. Destroy the driver before what `wakeup` writes to (the eventfd): once the
/// destructor returns, `wakeup` is never called again. An AsioTimer drives itself: it takes no
/// ExternalDriver (the constructor taking one is deleted, and through a SystemTimer& the
/// constructor throws std::invalid_argument).
///
/// Thread-safe: every member may be called from any thread (arm() and advance_clock() are meant
/// for the loop's thread: one remembered instant per timer). `wakeup` must not throw (what
/// escapes is printed to stderr), block, call into the timer, or destroy this driver.
class PURGATORY_TIMER_EXPORT ExternalDriver {
 public:
  /// Drives `timer`, calling `wakeup` as above (empty: no calls). Throws std::invalid_argument if
  /// the timer was not made with Driver::external or already has a driver (an AsioTimer's own
  /// included).
  explicit ExternalDriver(SystemTimer& timer, std::function<void()> wakeup = {});
  /// An AsioTimer is driven by its io_context.
  ExternalDriver(AsioTimer& timer, std::function<void()> wakeup = {}) = delete;
  /// Detaches from the timer: once it returns, `wakeup` is not running and is never called again;
  /// the timer keeps its tasks and may be given another driver.
  ~ExternalDriver();
  ExternalDriver(const ExternalDriver&) = delete;
  ExternalDriver& operator=(const ExternalDriver&) = delete;

  /// The instant (on the timer's clock) to wake at: the earliest non-empty bucket, a time already
  /// reached when a task is due now, or the next step of an ahead-of-time cascade; none while
  /// nothing is pending. The timer remembers it, to know when an add() must call `wakeup`.
  std::optional<Nanos> arm();

  /// arm() as a timeout for epoll_wait() or poll(): milliseconds from now to that instant,
  /// rounded up (a wait never ends before it), at most INT_MAX; 0 when something is due now,
  /// -1 when nothing is pending.
  int timeout_ms();

  /// Kafka's advanceClock: waits up to `max_wait` for the earliest bucket to come due, then hands
  /// every task due by now to the timer's executor, in batches of at most SystemTimer::kMaxBatch.
  /// Returns whether any was due. max_wait <= 0 never blocks (the call an event loop makes);
  /// Nanos::max() waits until something is due or the timer closes. A task already due when added
  /// is taken by the next call, never by the add() itself. Not from a task that an InlineExecutor
  /// runs inside this call with a max_wait above 0 (it would wait inside its own pass).
  bool advance_clock(Nanos max_wait = Nanos::zero());

  /// The timer driven.
  [[nodiscard]] SystemTimer& timer() const noexcept { return timer_; }

 private:
  SystemTimer& timer_;
};

}  // namespace purgatory
