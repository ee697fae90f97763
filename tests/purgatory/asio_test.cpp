// purgatory/asio.hpp: every promise of DelayedOperationPurgatory::async_watch().
#include "purgatory/asio.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>

#include <doctest/doctest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif

#include "asio_handler_support.hpp"
#include "contract_support.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "asio.hpp: the handler gets no error and the outcome (completed, expired, shut_down) once the "
    "operation ended and its callbacks ran, exactly once, posted to its executor") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto completed = probe(1s);
  auto expired = probe(10ms);
  auto shut = probe(1s);
  Received rc;
  Received re;
  Received rs;
  p.purgatory.async_watch(completed, {1}, recorder(io.get_executor(), rc, completed.get()));
  p.purgatory.async_watch(expired, {1}, recorder(io.get_executor(), re, expired.get()));
  p.purgatory.async_watch(shut, {1}, recorder(io.get_executor(), rs, shut.get()));
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
    "asio.hpp: an operation completed by the watch's first try still completes the handler by a "
    "post, never inside async_watch()") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(1s);
  op->completable = true;
  Received r;
  p.purgatory.async_watch(op, {1}, recorder(io.get_executor(), r, op.get()));
  CHECK(op->completions == 1);
  CHECK(r.calls == 0);
  io.run();
  CHECK(r.calls == 1);
  CHECK(r.outcome == Outcome::completed);
  CHECK(r.callbacks_had_run);
}

TEST_CASE(
    "asio.hpp: a pending wait bound to an io_context is outstanding work: io_context::run() does "
    "not return while the operation is awaited") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(1s);
  Received r;
  p.purgatory.async_watch(op, {1}, recorder(io.get_executor(), r, op.get()));
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
  asio::io_context io;
  auto op = probe(1s);
  Signal called;
  std::atomic<bool> on_completing_thread{true};
  Outcome got = Outcome::pending;
  const auto completing_thread = std::this_thread::get_id();
  p.purgatory.async_watch(op, {1}, [&](boost::system::error_code ec, Outcome o) {
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

TEST_CASE(
    "asio.hpp: emitting the handler's cancellation slot cancels the operation: it leaves every "
    "key and the timer, on_complete() sees Outcome::cancelled, counted in cancelled_total, the "
    "handler gets (operation_aborted, cancelled), and nothing decides it again") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(10ms);
  asio::cancellation_signal cancel;
  Received r;
  p.purgatory.async_watch(op, {1, 2}, cancellable(cancel, io.get_executor(), r, op.get()));
  cancel.emit(asio::cancellation_type::terminal);
  CHECK(op->outcome() == Outcome::cancelled);
  CHECK(op->seen_in_on_complete == Outcome::cancelled);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.manual.timer.size() == 0);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 0);
  p.advance(20ms);
  p.purgatory.shutdown();
  io.run();
  CHECK(r.calls == 1);
  CHECK(r.ec == kAborted);
  CHECK(r.outcome == Outcome::cancelled);
  CHECK(r.callbacks_had_run);
  CHECK(op->completions == 1);
  CHECK(op->expirations == 0);
}

TEST_CASE(
    "asio.hpp: a cancellation that finds the outcome already decided changes nothing: the wait "
    "completes with that outcome (completed, callbacks not yet run)") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(1s);
  asio::cancellation_signal cancel;
  Received r;
  p.purgatory.async_watch(op, {1}, cancellable(cancel, io.get_executor(), r, op.get()));
  op->lock();
  CHECK(op->force_complete());  // decided; its callbacks run on unlock()
  std::atomic<bool> requesting{false};
  std::thread requester([&] {
    requesting = true;
    cancel.emit(asio::cancellation_type::terminal);  // waits for the lock, then finds it decided
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
    "asio.hpp: a cancellation after cancel_for_key() handed the operation back cancels it all "
    "the same (its owner's decision): counted once, by cancel_for_key()") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(1s);
  asio::cancellation_signal cancel;
  Received r;
  p.purgatory.async_watch(op, {2}, cancellable(cancel, io.get_executor(), r));
  CHECK(p.purgatory.cancel_for_key(2).size() == 1);
  CHECK(op->outcome() == Outcome::pending);
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  CHECK(r.calls == 1);
  CHECK(r.ec == kAborted);
  CHECK(op->outcome() == Outcome::cancelled);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
}

TEST_CASE(
    "asio.hpp: a pending cancellable wait holds a reference to the operation, the reference goes "
    "when the wait completes") {
  ManualPurgatory<int> p;
  auto sentinel = std::make_shared<int>(0);
  std::weak_ptr<int> alive = sentinel;
  asio::io_context io;
  asio::cancellation_signal cancel;
  Received r;
  {
    auto op = make_operation(
        1s, [] { return false; }, [s = sentinel] {});
    sentinel.reset();
    p.purgatory.async_watch(op, {1}, cancellable(cancel, io.get_executor(), r));
  }                              // the owner dropped it
  CHECK_FALSE(alive.expired());  // the purgatory and the wait keep it
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  CHECK(r.calls == 1);
  CHECK(alive.expired());
}

TEST_CASE(
    "asio.hpp: refused (watched already, a null operation, no keys, after shutdown()): it "
    "throws, the handler is never called, nothing is watched because of it") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(1s);
  Received first;
  Received refused;
  p.purgatory.async_watch(op, {1}, recorder(io.get_executor(), first));
  CHECK_THROWS_AS(p.purgatory.async_watch(op, {2}, recorder(io.get_executor(), refused)),
                  OperationAlreadyWatched);
  CHECK_THROWS_AS(
      p.purgatory.async_watch(OperationRef(), {1}, recorder(io.get_executor(), refused)),
      std::invalid_argument);
  auto other = probe(1s);
  CHECK_THROWS_AS(
      p.purgatory.async_watch(other, std::span<const int>(), recorder(io.get_executor(), refused)),
      std::invalid_argument);
  CHECK(p.purgatory.watched() == 1);
  CHECK(op->force_complete());
  p.purgatory.shutdown();
  CHECK_THROWS_AS(p.purgatory.async_watch(other, {1}, recorder(io.get_executor(), refused)),
                  PurgatoryShutDown);
  io.run();
  CHECK(first.calls == 1);
  CHECK(refused.calls == 0);
  CHECK(other->outcome() == Outcome::pending);
}

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
TEST_CASE(
    "asio.hpp: with use_awaitable a refusal throws at the co_await, where the coroutine catches "
    "it, with redirect_error a cancellation sets operation_aborted, exceptions still throw") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(1s);
  auto second = probe(1h);
  asio::cancellation_signal cancel;
  Outcome first = Outcome::pending;
  Outcome redirected = Outcome::pending;
  boost::system::error_code ec;
  int refused = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        first = co_await p.purgatory.async_watch(op, 1, asio::use_awaitable);
      },
      asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          (void)co_await p.purgatory.async_watch(op, 1, asio::use_awaitable);
        } catch (const OperationAlreadyWatched&) {
          ++refused;
        }
        try {
          (void)co_await p.purgatory.async_watch(op, 1,
                                                 asio::redirect_error(asio::use_awaitable, ec));
        } catch (const OperationAlreadyWatched&) {
          ++refused;  // an exception, not an error code: still thrown
        }
        redirected = co_await p.purgatory.async_watch(
            second, 2, asio::redirect_error(asio::use_awaitable, ec));
      },
      asio::bind_cancellation_slot(cancel.slot(), asio::detached));
  io.poll();
  CHECK(refused == 2);
  CHECK(p.purgatory.watched() == 2);
  cancel.emit(asio::cancellation_type::terminal);  // the coroutine's cancellation reaches the watch
  CHECK(op->force_complete());
  io.run();
  CHECK(first == Outcome::completed);
  CHECK(ec == kAborted);
  CHECK(redirected == Outcome::cancelled);
}
#endif

TEST_CASE("asio.hpp: with use_future, the future holds the outcome") {
  ManualPurgatory<int> p;
  auto op = probe(10ms);
  std::future<Outcome> f = p.purgatory.async_watch(op, {1}, asio::use_future);
  p.advance(10ms);
  REQUIRE(f.wait_for(20s) == std::future_status::ready);
  CHECK(f.get() == Outcome::expired);
}

TEST_CASE("asio.hpp: with deferred, the watch happens when the deferred operation is launched") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(1s);
  Received r;
  auto launch = p.purgatory.async_watch(op, {1, 2}, asio::deferred);
  CHECK_FALSE(op->was_watched());
  std::move(launch)(recorder(io.get_executor(), r));
  CHECK(p.purgatory.watched() == 2);
  CHECK(op->force_complete());
  io.run();
  CHECK(r.calls == 1);
  CHECK(r.outcome == Outcome::completed);
}

}  // namespace
TEST_CASE(
    "asio.hpp: a plain-lambda handler (no associated executor) on an AsioTimer's one-thread "
    "io_context runs on that thread before io.run() returns: completed by a check, expired, and "
    "completed by the watch's first try") {
  asio::io_context io;
  AsioTimer timer(io);
  DelayedOperationPurgatory<int> waits(timer);
  struct Seen {
    int calls = 0;
    Outcome outcome = Outcome::pending;
    std::thread::id thread;
  };
  Seen checked, expired, at_once;
  auto plain = [](Seen& seen) {
    return [&seen](boost::system::error_code, Outcome o) {
      ++seen.calls;
      seen.outcome = o;
      seen.thread = std::this_thread::get_id();
    };
  };
  auto by_check = mock(1h);
  waits.async_watch(by_check, 1, plain(checked));
  waits.async_watch(mock(5ms), 2, plain(expired));
  auto ready = mock(1h);
  ready->completable = true;
  waits.async_watch(ready, 3, plain(at_once));
  asio::post(io, [&] {
    by_check->completable = true;
    CHECK(waits.check_and_complete(1) == 1);
  });
  CHECK(checked.calls + expired.calls + at_once.calls == 0);  // never inside async_watch()
  (void)io.run_for(30s);
  CHECK(io.stopped());  // returned by itself: nothing left pending
  for (const Seen* seen : {&checked, &expired, &at_once}) {
    CHECK(seen->calls == 1);
    CHECK(seen->thread == std::this_thread::get_id());
  }
  CHECK(checked.outcome == Outcome::completed);
  CHECK(expired.outcome == Outcome::expired);
  CHECK(at_once.outcome == Outcome::completed);
}

TEST_CASE(
    "asio.hpp: a plain-lambda handler on a purgatory whose timer is not an AsioTimer completes "
    "on the system executor, on a thread that is not the completer's, exactly once") {
  ManualPurgatory<int> p;
  std::promise<std::thread::id> ran;
  auto ran_on = ran.get_future();
  std::atomic<int> calls{0};
  auto op = mock(1h);
  p.purgatory.async_watch(op, 1, [&](boost::system::error_code ec, Outcome o) {
    CHECK(!ec);
    CHECK(o == Outcome::completed);
    if (calls.fetch_add(1) == 0) ran.set_value(std::this_thread::get_id());
  });
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  REQUIRE(ran_on.wait_for(30s) == std::future_status::ready);
  CHECK(ran_on.get() != std::this_thread::get_id());
  CHECK(calls.load() == 1);
}

}  // namespace purgatory::test
