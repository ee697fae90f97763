// Tests of purgatory/timer/async.hpp's async_wait(): one test per promise (docs/contracts.md);
// older tests of the same header are in async_test.cpp, races in races/async_race_test.cpp.
#include "purgatory/timer/async.hpp"

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif
#include <thread>
#include <type_traits>
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
#include <doctest/doctest.h>

#include "purgatory/timer/asio.hpp"

#include "async_test_support.hpp"
#include "threads.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using boost::system::error_code;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "async.hpp: async_wait completes once with no error after the task ran, never before the "
    "delay") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  purgatory::async_wait(m.timer, 10ms, c.handler());
  m.advance(9ms);
  io.poll();
  CHECK(c.seen.empty());
  m.advance(1ms);
  io.poll();
  CHECK(c.seen == std::vector<error_code>{error_code()});
  m.advance(100ms);
  io.poll();
  CHECK(c.seen.size() == 1);
}

TEST_CASE(
    "async.hpp: the same call serves a plain handler, a coroutine (use_awaitable) and a future "
    "(use_future), with completion signature void(error_code)") {
  SystemTimer timer(TimerOptions{.name = "tokens"});  // real clock
  Signal plain;
  purgatory::async_wait(timer, 2ms, [&](error_code ec) {
    CHECK(!ec);
    plain.set();
  });
  CHECK(plain.wait());
  std::future<void> f = purgatory::async_wait(timer, 2ms, boost::asio::use_future);
  static_assert(std::is_same_v<decltype(f), std::future<void>>);
  CHECK_NOTHROW(f.get());
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
  boost::asio::io_context io;
  bool resumed = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        co_await purgatory::async_wait(timer, 2ms, boost::asio::use_awaitable);
        resumed = true;
      },
      boost::asio::detached);
  io.run();  // the pending wait keeps it busy until the coroutine resumed
  CHECK(resumed);
#endif
  timer.close();
}

TEST_CASE(
    "async.hpp: the handler is posted to its associated executor: never run inside the "
    "initiating call, nor on the thread that ran the task") {
  ManualTimer m;  // inline executor: the task runs on the thread that advances
  boost::asio::io_context io;
  Completions c{io, {}};
  purgatory::async_wait(m.timer, 0ms, c.handler());
  CHECK(io.poll() == 0);  // nothing ran inside async_wait(), not even the task due at once
  m.advance(0ms);
  CHECK(c.seen.empty());  // the task ran; the handler was only posted
  CHECK(io.poll() == 1);
  CHECK(c.seen.size() == 1);

  SystemTimer timer(TimerOptions{.name = "posted"});  // its own reaper and executor threads
  boost::asio::io_context io2;
  std::thread::id ran_on;
  purgatory::async_wait(timer, 1ms, boost::asio::bind_executor(io2, [&](error_code) {
                          ran_on = std::this_thread::get_id();
                        }));
  io2.run();
  CHECK(ran_on == std::this_thread::get_id());
  timer.close();
}

TEST_CASE(
    "async.hpp: a pending wait bound to an io_context is outstanding work: run() does not return "
    "while it is pending, a plain lambda's wait keeps no io_context busy") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  purgatory::async_wait(m.timer, 5ms, c.handler());
  io.poll();
  CHECK_FALSE(io.stopped());  // work outstanding: run() would still be waiting
  m.advance(5ms);
  io.run();  // returns: the wait completed
  CHECK(c.seen.size() == 1);

  boost::asio::io_context unrelated;
  Signal called;
  purgatory::async_wait(m.timer, 5ms, [&](error_code) { called.set(); });
  unrelated.poll();
  CHECK(unrelated.stopped());  // nothing of this io_context is pending
  m.advance(5ms);
  CHECK(called.wait());
}

#if defined(__cpp_lib_jthread)
TEST_CASE(
    "async.hpp: a stop requested through the stop_token cancels the task: operation_aborted "
    "once, nothing scheduled, nothing later") {
  ManualTimer m(TimerOptions::Concurrency::thread_safe);  // the stop comes from another thread
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  purgatory::async_wait(m.timer, 50ms, stop.get_token(), c.handler());
  CHECK(m.timer.size() == 1);
  on_another_thread([&] { stop.request_stop(); });  // from any thread
  CHECK(m.timer.size() == 0);
  m.advance(100ms);
  io.run();
  CHECK(c.seen == std::vector<error_code>{kAborted});
}
#else
TEST_CASE(
    "async.hpp: the std::stop_token forms are left out: this standard library has no "
    "<stop_token>") {
  MESSAGE(
      "no <stop_token> (__cpp_lib_jthread): the std::stop_token overloads and their tests "
      "are not built");
}
#endif  // __cpp_lib_jthread

TEST_CASE(
    "async.hpp: a wait whose task close() handed back completes with operation_aborted, once the "
    "handed-back reference is dropped") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  purgatory::async_wait(m.timer, 50ms, c.handler());
  {
    const auto handed_back = m.timer.close();
    CHECK(handed_back.size() == 1);
    io.poll();
    CHECK(c.seen.empty());  // the caller of close() still holds the task
  }
  io.run();
  CHECK(c.seen == std::vector<error_code>{kAborted});
}

#if defined(__cpp_lib_jthread)
TEST_CASE(
    "async.hpp: a stop requested before the call cancels it at once: operation_aborted, nothing "
    "scheduled") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  stop.request_stop();
  purgatory::async_wait(m.timer, 50ms, stop.get_token(), c.handler());
  CHECK(m.timer.size() == 0);
  io.run();
  CHECK(c.seen == std::vector<error_code>{kAborted});
}

TEST_CASE(
    "async.hpp: a stop requested before the call cancels it at once, even with a delay of 0 on an "
    "inline executor: operation_aborted") {
  // Was finding 6: the initiation added the task before it looked at the stop, so a delay <= 0 on
  // an inline executor ran the task inside add() and the wait succeeded.
  ManualTimer m;  // inline executor: a delay of 0 runs the task inside add()
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  stop.request_stop();
  purgatory::async_wait(m.timer, 0ms, stop.get_token(), c.handler());
  io.run();
  CHECK(c.seen == std::vector<error_code>{kAborted});
}

TEST_CASE(
    "async.hpp: async_wait throws what add() throws (bad delay, full, closed, draining) and then "
    "the handler is never called") {
  boost::asio::io_context refused_io;  // the refused waits' handlers would run here
  Completions refused{refused_io, {}};
  boost::asio::io_context accepted_io;
  Completions accepted{accepted_io, {}};
  {
    ManualTimer m(1ms, 20, /*max_pending=*/1);
    CHECK_THROWS_AS(purgatory::async_wait(m.timer, SystemTimer::kMaxDelay + 1ns, refused.handler()),
                    std::invalid_argument);
    purgatory::async_wait(m.timer, 1h, accepted.handler());  // fills the wheel
    try {
      std::stop_source stop;
      purgatory::async_wait(m.timer, 5ms, stop.get_token(), refused.handler());
      FAIL("a full timer must refuse the wait");
    } catch (const TimerRejected& e) {
      CHECK(e.reason() == TimerRejected::Reason::pending_limit);
    }
    (void)m.timer.close();  // the accepted wait completes aborted
    try {
      purgatory::async_wait(m.timer, 5ms, refused.handler());
      FAIL("a closed timer must refuse the wait");
    } catch (const TimerRejected& e) {
      CHECK(e.reason() == TimerRejected::Reason::closed);
    }
  }
  {
    DrivenTimer<InlineExecutor> d;
    std::optional<TimerRejected::Reason> reason;
    d.timer.add(purgatory::make_task([&] {
                  try {
                    purgatory::async_wait(d.timer, 5ms, refused.handler());
                  } catch (const TimerRejected& e) {
                    reason = e.reason();
                  }
                }),
                1ms);
    std::thread mover([&] {
      for (int i = 0; i < 50 && !d.timer.is_closed(); ++i) {
        std::this_thread::sleep_for(200us);
        d.clock.advance(1ms);
      }
    });
    (void)d.timer.drain();
    mover.join();
    CHECK(reason == TimerRejected::Reason::draining);
  }
  refused_io.restart();
  refused_io.run();  // nothing refused is outstanding: returns at once
  CHECK(refused.seen.empty());
  accepted_io.run();
  CHECK(accepted.seen == std::vector<error_code>{kAborted});
}
#endif  // __cpp_lib_jthread

TEST_CASE(
    "async.hpp: a refused async_wait leaves the handler's io_context as it was: a wait accepted "
    "later still completes on io.run()") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  CHECK_THROWS_AS(purgatory::async_wait(m.timer, SystemTimer::kMaxDelay + 1ns, c.handler()),
                  std::invalid_argument);
  CHECK_FALSE(io.stopped());
  purgatory::async_wait(m.timer, 5ms, c.handler());
  m.advance(5ms);
  io.run();
  CHECK(c.seen == std::vector<error_code>{error_code()});
}

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
TEST_CASE(
    "async.hpp: with use_awaitable, a refused wait throws at co_await (what add() throws), "
    "catchable in the coroutine") {
  ManualTimer closed;
  (void)closed.timer.close();
  boost::asio::io_context io;
  bool caught = false;
  bool resumed = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        try {
          co_await purgatory::async_wait(closed.timer, 5ms, boost::asio::use_awaitable);
          resumed = true;
        } catch (const TimerRejected&) {
          caught = true;
        }
      },
      boost::asio::detached);
  io.run();
  CHECK(caught);
  CHECK_FALSE(resumed);
}

#if defined(__cpp_lib_jthread)
TEST_CASE(
    "async.hpp: with use_awaitable, each refusal throws what add() throws at its co_await (bad "
    "delay, full), with or without a stop_token, and a cancelled wait still throws "
    "operation_aborted "
    "and the coroutine goes on to a wait that succeeds") {
  ManualTimer m(1ms, 20, /*max_pending=*/1);
  boost::asio::io_context filler_io;
  Completions filler{filler_io, {}};
  std::stop_source filler_stop;
  purgatory::async_wait(m.timer, 1h, filler_stop.get_token(), filler.handler());  // fills it
  boost::asio::io_context io;
  int invalid = 0;
  std::optional<TimerRejected::Reason> reason;
  error_code aborted;
  bool done = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        try {
          co_await purgatory::async_wait(m.timer, SystemTimer::kMaxDelay + 1ns,
                                         boost::asio::use_awaitable);
        } catch (const std::invalid_argument&) {
          ++invalid;
        }
        std::stop_source unused;
        try {
          co_await purgatory::async_wait(m.timer, 5ms, unused.get_token(),
                                         boost::asio::use_awaitable);
        } catch (const TimerRejected& e) {
          reason = e.reason();
        }
        filler_stop.request_stop();  // room in the wheel again
        std::stop_source stop;
        stop.request_stop();  // cancelled at once: the wait completes with operation_aborted
        try {
          co_await purgatory::async_wait(m.timer, 5ms, stop.get_token(),
                                         boost::asio::use_awaitable);
        } catch (const boost::system::system_error& e) {
          aborted = e.code();
        }
        co_await purgatory::async_wait(m.timer, 0ms, boost::asio::use_awaitable);  // due at once
        done = true;
      },
      boost::asio::detached);
  run_driving(io, m);  // the 0 ms wait runs at the driver's next pass
  CHECK(io.stopped());
  CHECK(invalid == 1);
  CHECK(reason == TimerRejected::Reason::pending_limit);
  CHECK(aborted == kAborted);
  CHECK(done);
  CHECK(m.timer.size() == 0);  // nothing refused was left behind
  filler_io.run();
  CHECK(filler.seen == std::vector<error_code>{kAborted});
}

TEST_CASE(
    "async.hpp: with redirect_error(use_awaitable, ec), a refused wait throws at co_await, and "
    "error "
    "codes go to ec (operation_aborted for a cancelled wait, cleared for one that ran)") {
  ManualTimer m;
  boost::asio::io_context io;
  bool invalid = false;
  error_code cancelled;
  error_code ran = kAborted;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        try {
          co_await purgatory::async_wait(
              m.timer, SystemTimer::kMaxDelay + 1ns,
              boost::asio::redirect_error(boost::asio::use_awaitable, cancelled));
        } catch (const std::invalid_argument&) {
          invalid = true;
        }
        std::stop_source stop;
        stop.request_stop();
        co_await purgatory::async_wait(
            m.timer, 5ms, stop.get_token(),
            boost::asio::redirect_error(boost::asio::use_awaitable, cancelled));
        co_await purgatory::async_wait(
            m.timer, 0ms, boost::asio::redirect_error(boost::asio::use_awaitable, ran));
      },
      boost::asio::detached);
  run_driving(io, m);
  CHECK(io.stopped());
  CHECK(invalid);
  CHECK(cancelled == kAborted);
  CHECK(ran == error_code());
}
#endif  // __cpp_lib_jthread
#endif

TEST_CASE(
    "async.hpp: async_wait with a plain lambda runs the handler on Asio's "
    "system executor, bound to an io_context it keeps run() busy until it completes") {
  SystemTimer timer;  // real clock, its own threads
  Signal called;
  std::atomic<bool> on_caller{true};
  const auto caller = std::this_thread::get_id();
  purgatory::async_wait(timer, 1ms, [&](boost::system::error_code ec) {
    CHECK(!ec);
    on_caller = std::this_thread::get_id() == caller;
    called.set();
  });
  REQUIRE(called.wait());
  CHECK_FALSE(on_caller.load());

  boost::asio::io_context io;
  std::atomic<bool> bound_called{false};
  purgatory::async_wait(timer, 20ms,
                        boost::asio::bind_executor(io, [&](boost::system::error_code ec) {
                          CHECK(!ec);
                          bound_called = true;
                        }));
  io.run();  // returns only once the handler ran
  CHECK(bound_called.load());
  timer.close();
}

TEST_CASE(
    "async.hpp: a plain-lambda handler (no associated executor) of async_wait() on an AsioTimer's "
    "one-thread io_context runs on that thread before io.run() returns") {
  boost::asio::io_context io;
  AsioTimer timer(io);
  int calls = 0;
  boost::system::error_code got = boost::asio::error::operation_aborted;
  std::thread::id thread;
  async_wait(timer, 5ms, [&](boost::system::error_code ec) {
    ++calls;
    got = ec;
    thread = std::this_thread::get_id();
  });
  CHECK(calls == 0);  // never inside async_wait()
  (void)io.run_for(30s);
  CHECK(io.stopped());
  CHECK(calls == 1);
  CHECK(!got);
  CHECK(thread == std::this_thread::get_id());
}
