#include "purgatory/timer/async.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif
#if BOOST_VERSION >= 107700
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#endif
#include <doctest/doctest.h>

#include "async_test_support.hpp"
#include "timer_test_support.hpp"

namespace purgatory::test {
namespace {

using boost::system::error_code;

TEST_CASE("async_wait: the handler runs once, posted to its executor, when 50 ms have passed") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  async_wait(m.timer, 50ms, c.handler());
  CHECK(m.timer.size() == 1);
  m.advance(49ms);
  io.poll();
  CHECK(c.seen.empty());
  m.advance(1ms);
  CHECK(c.seen.empty());  // the task ran, but the handler is posted, not run on the timer thread
  io.poll();
  CHECK(c.seen == std::vector<error_code>{error_code()});
  CHECK(m.timer.size() == 0);
}

TEST_CASE("async_wait keeps io_context::run() busy until the wait completes") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  async_wait(m.timer, 10ms, c.handler());
  std::thread advancer([&] {
    std::this_thread::sleep_for(5ms);
    m.advance(10ms);
  });
  io.run();  // returns only once the handler ran
  advancer.join();
  CHECK(c.seen == std::vector<error_code>{error_code()});
}

TEST_CASE("async_wait with use_future: the future becomes ready only after the 10 ms delay") {
  ManualTimer m;
  std::future<void> done = async_wait(m.timer, 10ms, boost::asio::use_future);
  CHECK(done.wait_for(0s) == std::future_status::timeout);
  m.advance(9ms);
  CHECK(done.wait_for(1ms) == std::future_status::timeout);
  m.advance(1ms);
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  CHECK_NOTHROW(done.get());
}

#if defined(__cpp_lib_jthread)
TEST_CASE("async_wait with use_future: a cancelled wait throws operation_aborted from get()") {
  ManualTimer m;
  std::stop_source stop;
  // Asio sets the promise on its system executor's thread, which may still hold the future's state
  // when get() rethrows. future::get() lets go of the state before the exception reaches the
  // caller, and then only the exception's reference count (in libstdc++, which TSan does not see)
  // orders the caller's look at it before that thread frees it: TSan reported a race there in 31
  // of 300 runs of async_watch_test.cpp's use_future test. A shared_future keeps the caller's
  // reference until after the look, and that reference count is one TSan sees.
  std::shared_future<void> done =
      async_wait(m.timer, 10ms, stop.get_token(), boost::asio::use_future).share();
  stop.request_stop();
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  try {
    done.get();
    FAIL("get() did not throw");
  } catch (const boost::system::system_error& e) {
    CHECK(e.code() == kAborted);
  }
}

TEST_CASE("async_wait: a stop request cancels the task: operation_aborted once, nothing later") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  async_wait(m.timer, 50ms, stop.get_token(), c.handler());
  CHECK(m.timer.size() == 1);
  stop.request_stop();
  CHECK(m.timer.size() == 0);  // the underlying task left the wheel at once
  m.advance(100ms);
  io.poll();
  CHECK(c.seen == std::vector<error_code>{kAborted});
}

TEST_CASE("async_wait: a stop requested before the call completes it aborted, nothing scheduled") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  stop.request_stop();
  async_wait(m.timer, 50ms, stop.get_token(), c.handler());
  CHECK(m.timer.size() == 0);
  io.poll();
  CHECK(c.seen == std::vector<error_code>{kAborted});
}

TEST_CASE("async_wait: a stop after the task ran changes nothing, the wait succeeds once") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  async_wait(m.timer, 50ms, stop.get_token(), c.handler());
  m.advance(50ms);
  stop.request_stop();
  io.poll();
  CHECK(c.seen == std::vector<error_code>{error_code()});
}

TEST_CASE("async_wait: one stop source cancels several waits, each once") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  for (int i = 0; i < 3; ++i)
    async_wait(m.timer, 50ms, stop.get_token(), c.handler());
  async_wait(m.timer, 50ms, c.handler());  // not tied to the stop source
  stop.request_stop();
  CHECK(m.timer.size() == 1);
  m.advance(50ms);
  io.poll();
  CHECK(c.seen == std::vector<error_code>{kAborted, kAborted, kAborted, error_code()});
}
#else
TEST_CASE(
    "async_wait: the std::stop_token forms are left out: this standard library has no "
    "<stop_token>") {
  MESSAGE(
      "no <stop_token> (__cpp_lib_jthread): the std::stop_token overloads and their tests "
      "are not built");
}
#endif  // __cpp_lib_jthread

TEST_CASE("async_wait: close() completes a pending wait with operation_aborted") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  async_wait(m.timer, 50ms, c.handler());
  CHECK(m.timer.close().size() == 1);  // the handed-back task is dropped here
  io.run();                            // returns: the wait released its work
  CHECK(c.seen == std::vector<error_code>{kAborted});
}

TEST_CASE("async_wait throws what add() throws and then never calls the handler") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  CHECK_THROWS_AS(async_wait(m.timer, SystemTimer::kMaxDelay + 1s, c.handler()),
                  std::invalid_argument);
  (void)m.timer.close();
  CHECK_THROWS_AS(async_wait(m.timer, 50ms, c.handler()), TimerRejected);
  io.run();  // returns at once: no work was left behind
  CHECK(c.seen.empty());
}

#if defined(__cpp_lib_jthread)
TEST_CASE("async_wait: 2000 waits raced by stop requests from another thread end exactly once") {
  // Invariant: every wait completes exactly once, aborted or not. The stops (every other wait,
  // last first) land before, during and after the initiating calls, while the real timer (reaper
  // and executor threads) fires the tasks that are due.
  constexpr int kWaits = 2000;
  SystemTimer timer(TimerOptions{.name = "async-race"});
  boost::asio::io_context io;
  std::vector<std::stop_source> stops(kWaits);
  std::vector<int> completions(kWaits, 0);  // io thread only
  int aborted = 0;
  std::thread canceller([&] {
    for (int i = kWaits - 2; i >= 0; i -= 2)
      stops[i].request_stop();
  });
  for (int i = 0; i < kWaits; ++i) {
    async_wait(timer, std::chrono::microseconds(i % 4000), stops[i].get_token(),
               boost::asio::bind_executor(io, [&, i](error_code ec) {
                 ++completions[i];
                 if (ec == kAborted) ++aborted;
               }));
  }
  io.run();
  canceller.join();
  for (int i = 0; i < kWaits; ++i) {
    CHECK_MESSAGE(completions[i] == 1, "wait ", i);
  }
  CHECK(aborted <= kWaits / 2);
  CHECK(timer.size() == 0);
}
#endif  // __cpp_lib_jthread

#if defined(BOOST_ASIO_HAS_CO_AWAIT) && defined(__cpp_lib_jthread)
TEST_CASE("co_await async_wait(use_awaitable) resumes after 20 ms, a stopped one gets aborted") {
  ManualTimer m;
  boost::asio::io_context io;
  std::stop_source stop;
  bool plain_resumed = false;
  error_code stopped_ec;
  bool stopped_resumed = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        co_await async_wait(m.timer, 20ms, boost::asio::use_awaitable);
        plain_resumed = true;
      },
      boost::asio::detached);
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        co_await async_wait(m.timer, 20ms, stop.get_token(),
                            boost::asio::redirect_error(boost::asio::use_awaitable, stopped_ec));
        stopped_resumed = true;
      },
      boost::asio::detached);
  io.poll();  // both coroutines are now suspended in their waits
  CHECK(m.timer.size() == 2);
  stop.request_stop();
  io.poll();
  CHECK(stopped_resumed);
  CHECK(stopped_ec == kAborted);
  CHECK_FALSE(plain_resumed);
  m.advance(20ms);
  io.run();
  CHECK(plain_resumed);
}
#endif

#if BOOST_VERSION >= 107700
TEST_CASE("async_wait: emitting a bound cancellation slot cancels the task (Boost >= 1.77)") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  boost::asio::cancellation_signal signal;
  async_wait(m.timer, 50ms, boost::asio::bind_cancellation_slot(signal.slot(), c.handler()));
  CHECK(m.timer.size() == 1);
  signal.emit(boost::asio::cancellation_type::terminal);
  CHECK(m.timer.size() == 0);
  m.advance(100ms);
  io.poll();
  CHECK(c.seen == std::vector<error_code>{kAborted});
  signal.emit(boost::asio::cancellation_type::terminal);  // after completion: nothing happens
  io.poll();
  CHECK(c.seen.size() == 1);
}
#endif

}  // namespace
}  // namespace purgatory::test
