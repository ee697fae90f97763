/// @file
/// AsioTimer: a SystemTimer that runs on an Asio io_context, with no thread of its own.
///
/// @code
///   boost::asio::io_context io;
///   purgatory::AsioTimer timer(io);
///   timer.add(purgatory::make_task([] { std::puts("tick"); }), std::chrono::milliseconds(5));
///   io.run();  // returns once the task has run: an idle timer keeps no work alive
/// @endcode
#pragma once

#include <memory>
#include <stdexcept>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include "purgatory/timer/detail/asio_driver.hpp"
#include "purgatory/timer/executor.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory {

/// Runs expired tasks on an Asio executor, one posted handler per batch. Thread-safe. AsioTimer
/// uses one; give one to TimerOptions::executor to run a reaper-driven timer's tasks on Asio.
class AsioExecutor final : public Executor {
 public:
  /// Runs batches as handlers posted to `executor`.
  explicit AsioExecutor(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}

  /// One post per batch. When the post fails (out of memory) the batch is given back and the
  /// exception rethrown: the timer then runs the batch on the calling thread.
  void execute(ExpiredBatch& batch) override {
    const auto held = std::make_shared<ExpiredBatch>(std::move(batch));
    try {
      boost::asio::post(executor_, [held] { held->run_all(); });
    } catch (...) {
      batch = std::move(*held);
      throw;
    }
  }

 private:
  boost::asio::any_io_executor executor_;
};

/// A SystemTimer on an Asio executor: its expired tasks run there as handlers, and one
/// steady_timer wait there drives its clock, so it needs no thread. The wait is armed only while
/// tasks are pending: the timer keeps no work alive, and io_context::run() returns by itself once
/// the application's own work is done. Nothing to reset or stop at shutdown; destroy it before
/// its io_context, as any Asio I/O object. Everything else is SystemTimer's: add(), cancel,
/// purgatories built on it, async_wait().
/// Thread-safe, as SystemTimer; the io_context may be run by any number of threads. With
/// TimerOptions::Concurrency::single_thread (an io_context made with concurrency hint 1, run by
/// one thread) it takes no lock on add, cancel and expiry, and only that thread may call it.
class AsioTimer final : public SystemTimer {
 public:
  /// A timer on `io`. `options` as for SystemTimer, except that the executor and the driver are
  /// the io_context's: std::invalid_argument if `options.executor` is set, `options.clock` is
  /// not a SteadyClock (the wait is a steady_timer), or `options.concurrency` is single_thread on
  /// an io_context whose concurrency hint allows more than one thread to run it.
  explicit AsioTimer(boost::asio::io_context& io, TimerOptions options = {})
      : AsioTimer(io.get_executor(), std::move(options)) {}
  /// A timer on `executor` (an io_context's, a strand, any executor of one).
  explicit AsioTimer(const boost::asio::any_io_executor& executor, TimerOptions options = {})
      : SystemTimer(on_executor(executor, std::move(options))),
        executor_(executor),
        driver_(executor, *this) {}
  /// Stops driving, then closes the timer (its pending tasks are dropped, none runs).
  ~AsioTimer() override { driver_.stop(); }

  /// The executor its tasks run on, and where async_wait() and async_watch() complete a handler
  /// that has no associated executor of its own (as an Asio I/O object's handlers do).
  [[nodiscard]] const boost::asio::any_io_executor& get_executor() const noexcept {
    return executor_;
  }

 private:
  static TimerOptions on_executor(const boost::asio::any_io_executor& executor,
                                  TimerOptions options) {
    if (options.executor) {
      throw std::invalid_argument("AsioTimer '" + options.name +
                                  "': TimerOptions::executor must be unset (tasks run on the "
                                  "io_context)");
    }
    if (options.clock != nullptr && dynamic_cast<const SteadyClock*>(options.clock) == nullptr) {
      throw std::invalid_argument(
          "AsioTimer '" + options.name +
          "': the clock must be a SteadyClock (its wait is a steady_timer)");
    }
    if (options.concurrency == TimerOptions::Concurrency::single_thread &&
        !runs_on_one_thread(executor)) {
      throw std::invalid_argument(
          "AsioTimer '" + options.name +
          "': Concurrency::single_thread needs an io_context made with concurrency hint 1 "
          "(boost::asio::io_context io(1)), which one thread runs");
    }
    options.executor = std::make_shared<AsioExecutor>(executor);
    options.driver = TimerOptions::Driver::external;
    return options;
  }

  // Whether the executor's io_context says one thread runs it (concurrency hint 1, or a hint
  // that turns its scheduler's locking off). An executor of another context: the caller's word.
  static bool runs_on_one_thread(const boost::asio::any_io_executor& executor) {
    using Scheduler = boost::asio::detail::io_context_impl;
    boost::asio::execution_context& context =
        boost::asio::query(executor, boost::asio::execution::context);
    if (!boost::asio::has_service<Scheduler>(context)) return true;
    const int hint = boost::asio::use_service<Scheduler>(context).concurrency_hint();
    return hint == 1 || !BOOST_ASIO_CONCURRENCY_HINT_IS_LOCKING(SCHEDULER, hint);
  }

  boost::asio::any_io_executor executor_;
  detail::AsioClockDriver driver_;
};

namespace detail {
// Where async_wait() and async_watch() post a handler without an associated executor: the
// timer's executor if it is an AsioTimer, else the system executor (a thread of Asio's).
inline boost::asio::any_io_executor default_completion_executor(const SystemTimer& timer) {
  if (const auto* asio_timer = dynamic_cast<const AsioTimer*>(&timer)) {
    return asio_timer->get_executor();
  }
  return boost::asio::system_executor();
}
}  // namespace detail

}  // namespace purgatory
