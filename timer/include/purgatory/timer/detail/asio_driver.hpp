// Internal to purgatory/timer/asio.hpp: drives a SystemTimer (Driver::external, SteadyClock) from
// an Asio executor. Not for users.
//
// One steady_timer wait, on a strand, armed for the instant the timer's arm() returns, and none
// while nothing is pending: so the driver keeps no work alive on an idle timer. The timer's wakeup
// (an add() earlier than the armed instant, a cancel() that empties a base) posts a re-arm to the
// strand. It is the timer's one driver, as an ExternalDriver would be. stop() detaches the driver
// from its timer: a pass already running finishes first (it holds mu), later ones find no timer
// and disarm. The state lives on in the handlers still
// queued, never touching the timer.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/detail/timer_access.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace purgatory::detail {

class AsioClockDriver {
 public:
  AsioClockDriver(boost::asio::any_io_executor executor, SystemTimer& timer)
      : state_(std::make_shared<State>(std::move(executor), timer)) {
    std::weak_ptr<State> weak = state_;
    TimerAccess::attach_driver(timer, [weak] {
      if (const auto state = weak.lock()) State::post_rearm(state);
    });
    State::post_rearm(state_);
  }
  AsioClockDriver(const AsioClockDriver&) = delete;
  AsioClockDriver& operator=(const AsioClockDriver&) = delete;
  ~AsioClockDriver() { stop(); }

  // From any thread but the strand's: waits for a pass in progress, then drives no more.
  void stop() noexcept {
    {
      const std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->timer == nullptr) return;
      TimerAccess::detach_driver(*state_->timer);
      state_->timer = nullptr;
    }
    try {
      State::post_rearm(state_);  // disarms the wait on the strand
    } catch (...) {
      // Out of memory for the post: the armed wait fires once and finds no timer.
    }
  }

 private:
  struct State {
    State(boost::asio::any_io_executor executor, SystemTimer& t)
        : strand(boost::asio::make_strand(std::move(executor))), wait(strand), timer(&t) {}

    static void post_rearm(const std::shared_ptr<State>& self) {
      boost::asio::post(self->strand, [self] { self->rearm(self); });
    }

    // On the strand: the wait armed for the earliest instant, or none.
    void rearm(const std::shared_ptr<State>& self) {
      std::optional<Nanos> next;
      {
        const std::lock_guard<std::mutex> lock(mu);
        if (timer != nullptr) next = TimerAccess::arm(*timer);
      }
      if (!next) {
        if (armed) wait.cancel();
        armed = false;
        return;
      }
      if (armed && *next == armed_at) return;
      arm_at(self, *next);
    }

    void arm_at(const std::shared_ptr<State>& self, Nanos at) {
      armed = true;
      armed_at = at;
      wait.expires_at(std::chrono::steady_clock::time_point(
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(at)));
      wait.async_wait([self, generation = ++generation](const boost::system::error_code& ec) {
        if (ec || generation != self->generation) return;  // re-armed or cancelled meanwhile
        self->armed = false;
        bool failed = false;
        {
          const std::lock_guard<std::mutex> lock(self->mu);
          if (self->timer == nullptr) return;
          try {
            (void)TimerAccess::advance_clock(*self->timer, Nanos::zero());
          } catch (...) {
            failed = true;  // out of memory for a batch: what was not expired stays scheduled
          }
        }
        if (!failed) {
          self->rearm(self);
          return;
        }
        std::fputs("purgatory: AsioTimer: expiry failed (out of memory); retrying in 1 ms\n",
                   stderr);
        self->arm_at(self, SteadyClock::instance().now() + std::chrono::milliseconds(1));
      });
    }

    boost::asio::strand<boost::asio::any_io_executor> strand;
    boost::asio::steady_timer wait;  // used on the strand only
    std::mutex mu;                   // held by a pass over the timer, and by stop()
    SystemTimer* timer;              // guarded by mu; null once stopped
    bool armed = false;              // strand only
    Nanos armed_at{};                // strand only
    std::uint64_t generation = 0;    // strand only
  };

  std::shared_ptr<State> state_;
};

}  // namespace purgatory::detail
