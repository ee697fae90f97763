// asio.hpp: every promise of async_wait_outcome.
#include "purgatory/asio.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif
#include <thread>

#include <doctest/doctest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif

#include "../../purgatory/purgatory_test_support.hpp"
#include "../contract_support.hpp"
#include "purgatory_contract_support.hpp"
#include "race_schedule.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

using contract::probe;
using contract::ProbeRef;
using contract::rounds;
using contract::Signal;

// What a handler received, and how often.
struct Received {
  std::atomic<int> calls{0};
  boost::system::error_code ec;
  Outcome outcome = Outcome::completed;  // not pending: a wait that aborts must set pending
  std::thread::id thread;
  bool callbacks_had_run = false;
};

template <class Executor>
auto recorder(Executor ex, Received& r, const contract::Probe* op = nullptr) {
  return boost::asio::bind_executor(ex, [&r, op](boost::system::error_code ec, Outcome o) {
    r.ec = ec;
    r.outcome = o;
    r.thread = std::this_thread::get_id();
    r.callbacks_had_run = op != nullptr && op->callbacks_done.load();
    r.calls.fetch_add(1);
  });
}

TEST_CASE(
    "asio.hpp: the handler gets no error and the outcome (completed, expired, shut_down) once the "
    "operation ended and its callbacks ran, exactly once, posted to its executor") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto completed = probe(1s);
  auto expired = probe(10ms);
  auto shut = probe(1s);
  Received rc;
  Received re;
  Received rs;
  for (const auto& op : {completed, expired, shut})
    p.purgatory.try_complete_else_watch(op, {1});
  async_wait_outcome(completed, recorder(io.get_executor(), rc, completed.get()));
  async_wait_outcome(expired, recorder(io.get_executor(), re, expired.get()));
#if defined(__cpp_lib_jthread)
  async_wait_outcome(shut, std::stop_token(), recorder(io.get_executor(), rs, shut.get()));
#else
  async_wait_outcome(shut, recorder(io.get_executor(), rs, shut.get()));
#endif
  CHECK(completed->force_complete());
  CHECK(rc.calls == 0);  // never inline in the completing thread: posted
  p.advance(10ms);
  p.purgatory.shutdown();
  CHECK(re.calls + rs.calls == 0);
  io.run();
  for (Received* r : {&rc, &re, &rs}) {
    CHECK(r->calls == 1);
    CHECK_FALSE(r->ec);
    CHECK(r->callbacks_had_run);
    CHECK(r->thread == std::this_thread::get_id());  // io.run()'s thread
  }
  CHECK(rc.outcome == Outcome::completed);
  CHECK(re.outcome == Outcome::expired);
  CHECK(rs.outcome == Outcome::shut_down);
  io.restart();
  io.run();
  CHECK(rc.calls == 1);
}

TEST_CASE(
    "asio.hpp: a pending wait bound to an io_context is outstanding work: io_context::run() does "
    "not return while the operation is awaited") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  Received r;
  async_wait_outcome(op, recorder(io.get_executor(), r, op.get()));
  std::atomic<bool> run_returned{false};
  std::thread runner([&] {
    io.run();
    run_returned = true;
  });
  std::this_thread::sleep_for(10ms);
  CHECK_FALSE(run_returned.load());
  CHECK(op->force_complete());
  runner.join();
  CHECK(r.calls == 1);
  CHECK(r.outcome == Outcome::completed);
}

TEST_CASE(
    "asio.hpp: a plain lambda's handler runs on Asio's system executor, not on the completing "
    "thread, and keeps no io_context busy") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  Signal called;
  std::atomic<bool> on_completing_thread{true};
  Outcome got = Outcome::pending;
  const auto completing_thread = std::this_thread::get_id();
  async_wait_outcome(op, [&](boost::system::error_code ec, Outcome o) {
    CHECK_FALSE(ec);
    got = o;
    on_completing_thread = std::this_thread::get_id() == completing_thread;
    called.set();
  });
  io.run();  // nothing outstanding on io: returns at once although the wait is pending
  CHECK(io.stopped());
  CHECK(op->force_complete());
  REQUIRE(called.wait());
  CHECK(got == Outcome::completed);
  CHECK_FALSE(on_completing_thread.load());
}

#if defined(__cpp_lib_jthread)
TEST_CASE(
    "asio.hpp: a stop request withdraws the operation as cancel_for_key() does: timeout "
    "cancelled, every key left, counted in cancelled_total, no outcome, on_complete() does not "
    "run, the handler gets (operation_aborted, pending), the owner decides") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = probe(10ms);
  p.purgatory.try_complete_else_watch(op, {1, 2});
  std::stop_source stop;
  Received r;
  async_wait_outcome(op, stop.get_token(), recorder(io.get_executor(), r));
  stop.request_stop();
  io.run();
  CHECK(r.calls == 1);
  CHECK(r.ec == boost::asio::error::operation_aborted);
  CHECK(r.outcome == Outcome::pending);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.manual.timer->size() == 0);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 0);
  p.advance(20ms);
  p.purgatory.shutdown();
  CHECK(op->outcome() == Outcome::pending);  // no purgatory decided it
  CHECK(op->completions == 0);
  CHECK(op->force_complete());  // its owner may
  CHECK(op->completions == 1);
  io.restart();
  io.run();
  CHECK(r.calls == 1);  // the handler is not called again
}

TEST_CASE(
    "asio.hpp: a stop request withdraws an operation whose owner withdrew its timeout "
    "(TimerTask::cancel()), as cancel_for_key() does: the handler gets (operation_aborted, "
    "pending)") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  CHECK(op->cancel());  // "calling it yourself withdraws the timeout" (delayed_operation.hpp)
  std::stop_source stop;
  Received r;
  async_wait_outcome(op, stop.get_token(), recorder(io.get_executor(), r));
  stop.request_stop();
  (void)io.run_for(500ms);  // the pending wait is work: run() would not return without it
  CHECK(r.calls == 1);
  CHECK(r.ec == boost::asio::error::operation_aborted);
  CHECK(r.outcome == Outcome::pending);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
  CHECK(op->force_complete());  // the owner decides
}

TEST_CASE(
    "asio.hpp: stop requests racing checks of the key (seeded schedule): an aborted wait's "
    "operation is never decided by a purgatory, a successful wait reports the operation's own "
    "outcome") {
  const int n = rounds(200, 40);
  int aborted = 0;
  std::uint64_t request_hits = 0;
  for (int round = 0; round < n; ++round) {
    const std::uint64_t seed = RaceSchedule::seed(static_cast<std::uint64_t>(round));
    INFO("seed " << seed);
    ManualPurgatory<int> p;
    boost::asio::io_context io;
    auto op = probe(2ms);
    p.purgatory.try_complete_else_watch(op, {1});
    op->completable = true;
    std::stop_source stop;
    Received r;
    async_wait_outcome(op, stop.get_token(), recorder(io.get_executor(), r));
    {
      RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 40us});
      // One round in three stops first (then the checks and the expiry must find it
      // withdrawn); the others race the stop against them.
      const bool stop_first = round % 3 == 0;
      if (stop_first) stop.request_stop();
      std::thread checker([&] { (void)p.purgatory.check_and_complete(1); });
      std::thread clock([&] { p.advance(2ms); });
      std::this_thread::sleep_for(
          std::chrono::microseconds(seed % 2 == 0 ? seed % 30 : seed % 300));
      if (!stop_first) stop.request_stop();
      checker.join();
      clock.join();
      request_hits += schedule.hits("OutcomeWait::request_cancel");
    }
    p.purgatory.shutdown();
    io.run();
    REQUIRE(r.calls == 1);
    if (r.ec == boost::asio::error::operation_aborted) {
      ++aborted;
      CHECK(r.outcome == Outcome::pending);
      CHECK(op->outcome() == Outcome::pending);
      CHECK(op->completions == 0);
    } else {
      CHECK_FALSE(r.ec);
      CHECK(r.outcome == op->outcome());
      CHECK(op->completions == 1);
    }
  }
  MESSAGE("aborted " << aborted << " of " << n);
  CHECK(aborted > 0);
  CHECK(request_hits > 0);
}

TEST_CASE(
    "asio.hpp: a stop request that finds the outcome already decided changes nothing: the wait "
    "completes with that outcome (completed, callbacks not yet run)") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  std::stop_source stop;
  Received r;
  async_wait_outcome(op, stop.get_token(), recorder(io.get_executor(), r, op.get()));
  op->lock();
  CHECK(op->force_complete());  // decided; its callbacks run on unlock()
  bool requesting = false;
  std::thread requester([&] {
    requesting = true;
    stop.request_stop();  // waits for the lock, then finds the outcome decided
  });
  std::this_thread::sleep_for(2ms);
  op->unlock();
  requester.join();
  CHECK(requesting);
  io.run();
  CHECK(r.calls == 1);
  CHECK_FALSE(r.ec);
  CHECK(r.outcome == Outcome::completed);
  CHECK(p.purgatory.metrics().cancelled_total == 0);
}

TEST_CASE(
    "asio.hpp: a stop request that finds the timeout firing changes nothing: the wait completes "
    "with Outcome::expired") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = probe(5ms);
  p.purgatory.try_complete_else_watch(op, {1});
  std::stop_source stop;
  Received r;
  async_wait_outcome(op, stop.get_token(), recorder(io.get_executor(), r, op.get()));
  RaceSchedule schedule({.seed = RaceSchedule::seed(0),
                         .pause_probability = 0.0,
                         .actions = {{"DelayedOperation::complete_with: still pending", [&] {
                                        std::thread t([&] { stop.request_stop(); });
                                        t.join();
                                      }}}});
  p.advance(5ms);  // the expiry starts, and the stop comes before it takes the lock
  CHECK(schedule.hits("complete_with: still pending") == 1);
  CHECK(schedule.hits("OutcomeWait::request_cancel") == 1);
  io.run();
  CHECK(r.calls == 1);
  CHECK_FALSE(r.ec);
  CHECK(r.outcome == Outcome::expired);
  CHECK(op->expirations == 1);
  CHECK(p.purgatory.metrics().cancelled_total == 0);
}

TEST_CASE(
    "asio.hpp: a stop request for an operation no purgatory watches (not yet, or not any more) "
    "only ends the wait") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto not_yet = probe(1s);
  std::stop_source stop1;
  Received r1;
  async_wait_outcome(not_yet, stop1.get_token(), recorder(io.get_executor(), r1));
  stop1.request_stop();
  io.run();
  CHECK(r1.calls == 1);
  CHECK(r1.ec == boost::asio::error::operation_aborted);
  CHECK(r1.outcome == Outcome::pending);
  // The operation itself is untouched: it can be watched and completes as usual.
  CHECK_FALSE(p.purgatory.try_complete_else_watch(not_yet, {1}));
  not_yet->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  CHECK(not_yet->completions == 1);

  auto not_any_more = probe(1s);
  p.purgatory.try_complete_else_watch(not_any_more, {2});
  std::stop_source stop2;
  Received r2;
  async_wait_outcome(not_any_more, stop2.get_token(), recorder(io.get_executor(), r2));
  CHECK(p.purgatory.cancel_for_key(2).size() == 1);
  stop2.request_stop();
  io.restart();
  io.run();
  CHECK(r2.ec == boost::asio::error::operation_aborted);
  CHECK(p.purgatory.metrics().cancelled_total == 1);  // counted once, by cancel_for_key()
  CHECK(not_any_more->outcome() == Outcome::pending);
  CHECK(io.stopped());
  CHECK(r1.calls == 1);
}

TEST_CASE(
    "asio.hpp: a pending cancellable wait holds a reference to the operation, the reference goes "
    "when the wait completes") {
  auto sentinel = std::make_shared<int>(0);
  std::weak_ptr<int> alive = sentinel;
  boost::asio::io_context io;
  std::stop_source stop;
  Received r;
  {
    auto op = make_operation(
        1s, [] { return false; }, [s = sentinel] {});
    sentinel.reset();
    async_wait_outcome(op, stop.get_token(), recorder(io.get_executor(), r));
  }                              // the owner dropped it
  CHECK_FALSE(alive.expired());  // the wait keeps it reachable for a request
  stop.request_stop();
  io.run();
  CHECK(r.calls == 1);
  CHECK(alive.expired());

  // Completed normally: the same.
  ManualPurgatory<int> p;
  auto sentinel2 = std::make_shared<int>(0);
  std::weak_ptr<int> alive2 = sentinel2;
  std::stop_source stop2;
  Received r2;
  {
    auto op = make_operation(
        1s, [] { return false; }, [s = sentinel2] {});
    sentinel2.reset();
    p.purgatory.try_complete_else_watch(op, {1});
    async_wait_outcome(op, stop2.get_token(), recorder(io.get_executor(), r2));
    CHECK(op->force_complete());
  }
  io.restart();
  io.run();
  CHECK(r2.calls == 1);
  CHECK(alive2.expired());
}

TEST_CASE(
    "asio.hpp: at most one wait per operation: a second throws std::logic_error and a null "
    "operation std::invalid_argument, their handlers are never called") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  Received first;
  Received second;
  Received null;
  async_wait_outcome(op, recorder(io.get_executor(), first));
  CHECK_THROWS_AS(async_wait_outcome(op, recorder(io.get_executor(), second)), std::logic_error);
  std::stop_source stop;
  CHECK_THROWS_AS(async_wait_outcome(op, stop.get_token(), recorder(io.get_executor(), second)),
                  std::logic_error);
  CHECK_THROWS_AS(async_wait_outcome(OperationRef(), recorder(io.get_executor(), null)),
                  std::invalid_argument);
  CHECK_THROWS_AS(
      async_wait_outcome(OperationRef(), stop.get_token(), recorder(io.get_executor(), null)),
      std::invalid_argument);
  stop.request_stop();  // the refused cancellable wait does not withdraw the operation
  CHECK(p.purgatory.watched() == 1);
  CHECK(op->force_complete());
  io.run();
  CHECK(first.calls == 1);
  CHECK(second.calls == 0);
  CHECK(null.calls == 0);
}
#else
TEST_CASE(
    "asio.hpp: the std::stop_token forms are left out: this standard library has no "
    "<stop_token>") {
  MESSAGE(
      "no <stop_token> (__cpp_lib_jthread): the std::stop_token overloads and their tests "
      "are not built");
}
#endif  // __cpp_lib_jthread

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#if defined(__cpp_lib_jthread)
TEST_CASE(
    "asio.hpp: with use_awaitable, a second wait throws std::logic_error at its co_await, the "
    "coroutine catches it and the first wait still gets the outcome") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  Outcome first = Outcome::pending;
  int refused = 0;
  int refused_redirected = 0;
  bool went_on = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        first = co_await async_wait_outcome(op, boost::asio::use_awaitable);
      },
      boost::asio::detached);
  io.poll();  // the first wait holds the operation's listener now
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        try {
          (void)co_await async_wait_outcome(op, boost::asio::use_awaitable);
        } catch (const std::logic_error&) {
          ++refused;
        }
        boost::system::error_code ec;
        try {
          std::stop_source stop;
          (void)co_await async_wait_outcome(
              op, stop.get_token(), boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        } catch (const std::logic_error&) {
          ++refused_redirected;  // an exception, not an error code: still thrown
        }
        went_on = true;
      },
      boost::asio::detached);
  io.poll();
  CHECK(refused == 1);
  CHECK(refused_redirected == 1);
  CHECK(went_on);
  CHECK(p.purgatory.watched() == 1);  // the refused waits withdrew nothing
  CHECK(op->force_complete());
  io.run();
  CHECK(first == Outcome::completed);
  // A null operation throws from the call itself, before anything is awaited.
  CHECK_THROWS_AS((void)async_wait_outcome(OperationRef(), boost::asio::use_awaitable),
                  std::invalid_argument);
}
#endif  // __cpp_lib_jthread
#endif

TEST_CASE("asio.hpp: with use_future, the future holds the outcome") {
  ManualPurgatory<int> p;
  auto op = probe(10ms);
  p.purgatory.try_complete_else_watch(op, {1});
  std::future<Outcome> f = async_wait_outcome(op, boost::asio::use_future);
  p.advance(10ms);
  REQUIRE(f.wait_for(20s) == std::future_status::ready);
  CHECK(f.get() == Outcome::expired);
}

}  // namespace
}  // namespace purgatory::test
