// AsioSteadyTimer: one boost::asio::steady_timer + async_wait per task, on one io_context.
//
// The add+cancel loop runs inside a handler on the io_context's own thread, as a server's would:
// cancel() then queues the operation_aborted handler privately instead of waking the reactor with
// a syscall, and the aborted handlers run between rounds of kRound iterations (one event-loop
// pass, with its epoll_wait(0), per round), all timed. A loop pass per iteration (io.poll() after
// each add+cancel) costs 200-450 ns here, nearly all of it that syscall, which says nothing about
// the timer; a busy server's pass handles many events, hence kRound = 32.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "timer_under_test.hpp"

namespace timer_bench {
namespace {

class AsioImpl {
 public:
  explicit AsioImpl(std::size_t n) : payloads_(n) {
    timers_.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      timers_.emplace_back(io_);
  }
  void add(std::size_t i, Nanos delay) {
    timers_[i].expires_after(delay);
    wait(i);
  }
  void add_at(std::size_t i, std::int64_t deadline) {
    timers_[i].expires_at(std::chrono::steady_clock::time_point(Nanos{deadline}));
    wait(i);
  }
  void wait(std::size_t i) {
    timers_[i].async_wait([this, i](const boost::system::error_code& ec) {
      if (ec) {
        ++aborted_;
      } else {
        payloads_[i]();
      }
    });
  }
  bool cancel(std::size_t i) { return timers_[i].cancel() == 1; }
  // Every pending timer is due (AddExpire): run() returns once their handlers have run.
  void expire_due() {
    io_.run();
    io_.restart();
  }
  [[nodiscard]] std::uint64_t runs(std::size_t i) const { return payloads_[i].runs; }
  [[nodiscard]] std::uint64_t aborted() const { return aborted_; }

  // AddCancelThreads: a thread runs the io_context (the aborted handlers) while benchmark threads
  // add and cancel. The handlers then run on that thread only, so aborted_ needs no lock.
  void start_io_thread() {
    work_.emplace(io_.get_executor());
    io_thread_ = std::thread([this] { io_.run(); });
  }
  void stop_io_thread() {
    work_.reset();
    io_.stop();  // the pending timers would keep run() going
    io_thread_.join();
    io_.restart();
  }

  // The iterations run in handlers on the io_context's thread, kRound per handler; each handler
  // posts the next, so the aborted handlers of a round run in the same loop pass, before it.
  template <class Body>
  void loop(benchmark::State& state, Body& body) {
    struct Round {
      benchmark::State* state;
      Body* body;
      boost::asio::io_context* io;
      void operator()() const {
        if (!state->KeepRunningBatch(kRound)) {
          io->stop();
          return;
        }
        for (int k = 0; k < kRound; ++k)
          (*body)();
        boost::asio::post(*io, *this);
      }
    };
    boost::asio::post(io_, Round{&state, &body, &io_});
    io_.run();
    io_.restart();
    io_.poll();  // untimed: nothing should be left, but let stragglers be counted
  }

 private:
  // io_context(1): the single-threaded event loop, Asio's recommended hint for it (AddCancelThreads
  // adds from other threads too: the hint does not turn off Asio's locking, only the UNSAFE hints
  // would).
  boost::asio::io_context io_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread io_thread_;
  std::vector<boost::asio::steady_timer> timers_;  // destroyed before io_
  std::vector<Payload> payloads_;
  std::uint64_t aborted_ = 0;
};

static_assert(TimerUnderTest<AsioImpl>);

}  // namespace
}  // namespace timer_bench
