/// @file
/// Asio integration: run expired tasks on an Asio executor, and drive a SystemTimer from an
/// io_context with one steady_timer, so an Asio server needs no timer thread at all.
///
/// @code
///   boost::asio::io_context io;
///   purgatory::SystemTimer timer(purgatory::TimerOptions{
///       .executor = std::make_shared<purgatory::AsioExecutor>(io.get_executor()),
///       .driver = purgatory::TimerOptions::Driver::external});
///   purgatory::AsioDriver driver(io.get_executor(), timer);
///   timer.add(purgatory::make_task([] { std::puts("tick"); }), std::chrono::milliseconds(5));
///   io.run();  // returns once nothing is pending: an idle timer keeps no wait armed
/// @endcode
///
/// The driver keeps exactly one async_wait armed, for the earliest non-empty bucket; an add()
/// that brings an earlier deadline re-arms it through a post to the driver's strand.
#pragma once


#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "purgatory/timer/executor.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory {

/// Posts expired tasks to an Asio executor, one handler per batch. Thread-safe.
class AsioExecutor final : public Executor {
 public:
  /// Runs batches as handlers posted to `executor`.
  explicit AsioExecutor(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}

  /// One post per batch: the tasks of a batch are due together and run one after the other.
  /// When the post fails (out of memory) the batch is given back and the exception rethrown: the
  /// timer then runs its tasks on the calling thread (see Executor::execute()).
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

/// Drives `timer` (created with Driver::external and the default SteadyClock) from an Asio
/// executor. Thread-safe: the driver's own work runs on a strand, so the io_context may be run by
/// any number of threads. The timer must outlive the io_context's last run; the driver may be
/// destroyed earlier (it then stops driving).
class AsioDriver {
 public:
  /// Starts driving `timer` from `executor`, taking its wakeup hook
  /// (SystemTimer::set_wakeup_hook()). Throws std::invalid_argument if the timer's clock is not a
  /// SteadyClock.
  AsioDriver(boost::asio::any_io_executor executor, SystemTimer& timer)
      : impl_(std::make_shared<Impl>(std::move(executor), timer)) {
    if (dynamic_cast<const SteadyClock*>(&timer.clock()) == nullptr) {
      throw std::invalid_argument(
          "AsioDriver: the timer must use SteadyClock (steady_timer waits on steady_clock)");
    }
    std::weak_ptr<Impl> weak = impl_;
    timer.set_wakeup_hook([weak] {
      if (auto impl = weak.lock()) impl->post_rearm(impl);
    });
    impl_->post_rearm(impl_);
  }
  /// Stops driving: the armed wait is cancelled (on the strand), so io.run() is not kept busy.
  ~AsioDriver() {
    impl_->stopped.store(true, std::memory_order_release);
    impl_->post_rearm(impl_);
  }
  AsioDriver(const AsioDriver&) = delete;
  AsioDriver& operator=(const AsioDriver&) = delete;

 private:
  struct Impl {
    Impl(boost::asio::any_io_executor executor, SystemTimer& t)
        : strand(boost::asio::make_strand(std::move(executor))), wait(strand), timer(t) {}

    void post_rearm(const std::shared_ptr<Impl>& self) {
      boost::asio::post(strand, [self] { self->rearm(self); });
    }

    // On the strand: arm the wait for the earliest bucket, or nothing when the wheel is empty.
    void rearm(const std::shared_ptr<Impl>& self) {
      if (stopped.load(std::memory_order_acquire)) {
        wait.cancel();
        return;
      }
      const auto next = timer.arm();
      if (!next) {
        if (armed) wait.cancel();
        armed = false;
        return;
      }
      if (armed && *next == armed_at) return;
      armed = true;
      armed_at = *next;
      wait.expires_at(std::chrono::steady_clock::time_point(
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(*next)));
      wait.async_wait([self, generation = ++generation](const boost::system::error_code& ec) {
        if (ec || generation != self->generation) return;  // re-armed or cancelled meanwhile
        self->armed = false;
        if (self->stopped.load(std::memory_order_acquire)) return;
        self->timer.advance_clock(Nanos::zero());
        self->rearm(self);
      });
    }

    boost::asio::strand<boost::asio::any_io_executor> strand;
    boost::asio::steady_timer wait;  // used on the strand only
    SystemTimer& timer;
    std::atomic<bool> stopped{false};
    bool armed = false;            // strand only
    Nanos armed_at{};              // strand only
    std::uint64_t generation = 0;  // strand only
  };

  std::shared_ptr<Impl> impl_;
};

}  // namespace purgatory
