#include "purgatory/asio.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif
#include <doctest/doctest.h>

#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using Seen = std::pair<error_code, Outcome>;
const error_code kAborted = asio::error::operation_aborted;

// Records every completion of the waits it hands out; the handlers run on `io`.
struct Completions {
  asio::io_context& io;
  std::vector<Seen> seen;

  auto handler() {
    return asio::bind_executor(
        io, [this](error_code ec, Outcome outcome) { seen.emplace_back(ec, outcome); });
  }
};

// A mock operation watched with async_watch() under `keys`, by a handler that `cancel` can cancel;
// the handler runs on `io` and records into `c`.
struct CancellableWatch {
  explicit CancellableWatch(std::initializer_list<int> keys) {
    p.purgatory.async_watch(op, keys, asio::bind_cancellation_slot(cancel.slot(), c.handler()));
  }

  ManualPurgatory<int> p;
  asio::io_context io;
  Completions c{io, {}};
  asio::cancellation_signal cancel;
  MockRef op = mock(1s);
};

TEST_CASE("async_watch: a check completes it early: (no error, completed) once, posted") {
  ManualPurgatory<int> p;
  asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  p.purgatory.async_watch(op, {1}, c.handler());
  CHECK(p.purgatory.watched() == 1);
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  CHECK(c.seen.empty());  // posted, never run on the completing thread
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{error_code(), Outcome::completed}});
  CHECK(op->completions == 1);
}

TEST_CASE("async_watch: completed by its first try: the handler is still posted, not run inside") {
  ManualPurgatory<int> p;
  asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  op->completable = true;
  p.purgatory.async_watch(op, {1}, c.handler());
  CHECK(op->completions == 1);  // on_complete() ran in the call (the operation's callback)
  CHECK(c.seen.empty());        // the handler did not
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{error_code(), Outcome::completed}});
  CHECK(p.purgatory.watched() == 0);
}

TEST_CASE(
    "async_watch: the timeout passes: (no error, expired), and shutdown(): (no error, shut_down)") {
  ManualPurgatory<int> p;
  asio::io_context io;
  Completions c{io, {}};
  auto expiring = mock(50ms);
  auto waiting = mock(1h);
  p.purgatory.async_watch(expiring, {1}, c.handler());
  p.purgatory.async_watch(waiting, {2}, c.handler());
  p.advance(50ms);
  io.poll();
  REQUIRE(c.seen.size() == 1);
  CHECK(c.seen[0] == Seen{error_code(), Outcome::expired});
  CHECK(expiring->expirations == 1);
  p.purgatory.shutdown();
  io.poll();
  REQUIRE(c.seen.size() == 2);
  CHECK(c.seen[1] == Seen{error_code(), Outcome::shut_down});
}

TEST_CASE(
    "async_watch: the handler's cancellation slot cancels the operation: (operation_aborted, "
    "cancelled), on_complete() once, off its keys, and nothing decides it again") {
  CancellableWatch w({1, 2});
  CHECK(w.p.purgatory.watched() == 2);
  w.cancel.emit(asio::cancellation_type::terminal);
  CHECK(w.op->outcome() == Outcome::cancelled);
  CHECK(w.op->completions == 1);
  CHECK(w.p.purgatory.watched() == 0);
  CHECK(w.p.manual.timer.size() == 0);
  CHECK(w.p.purgatory.metrics().cancelled_total == 1);
  w.op->completable = true;
  CHECK(w.p.purgatory.check_and_complete(1) == 0);
  w.p.advance(2s);
  w.io.poll();
  CHECK(w.c.seen == std::vector<Seen>{{kAborted, Outcome::cancelled}});
  CHECK(w.op->completions == 1);
  CHECK(w.op->expirations == 0);
}

TEST_CASE("async_watch: every cancellation type cancels it (terminal, partial, total)") {
  for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                          asio::cancellation_type::total}) {
    CancellableWatch w({1});
    w.cancel.emit(type);
    w.io.poll();
    CHECK(w.c.seen == std::vector<Seen>{{kAborted, Outcome::cancelled}});
  }
}

TEST_CASE("async_watch: a cancellation after the outcome changes nothing") {
  CancellableWatch w({1});
  CHECK(w.op->force_complete());
  // Before the handler ran: too late all the same.
  w.cancel.emit(asio::cancellation_type::terminal);
  w.io.poll();
  CHECK(w.c.seen == std::vector<Seen>{{error_code(), Outcome::completed}});
  CHECK(w.op->outcome() == Outcome::completed);
  CHECK(w.p.purgatory.metrics().cancelled_total == 0);
}

TEST_CASE("async_watch: with use_future the future holds the outcome") {
  ManualPurgatory<int> p;
  auto op = mock(1s);
  std::future<Outcome> outcome = p.purgatory.async_watch(op, {1}, asio::use_future);
  CHECK(outcome.wait_for(0s) == std::future_status::timeout);
  CHECK(op->force_complete());
  CHECK(outcome.get() == Outcome::completed);

  auto cancelled = mock(1s);
  asio::cancellation_signal cancel;
  // Shared, so that this thread keeps its reference to the future's state while it looks at the
  // exception: why, in async_test.cpp's use_future test (else TSan reports a race in 1 run of 10).
  std::shared_future<Outcome> aborted =
      p.purgatory
          .async_watch(cancelled, {1},
                       asio::bind_cancellation_slot(cancel.slot(), asio::use_future))
          .share();
  cancel.emit(asio::cancellation_type::terminal);
  try {
    (void)aborted.get();
    FAIL("a cancelled wait's future holds operation_aborted");
  } catch (const boost::system::system_error& e) {
    CHECK(e.code() == kAborted);
  }
}

TEST_CASE(
    "async_watch: with deferred nothing is watched until the deferred operation is launched, and "
    "the keys are its own (the caller's list is gone by then)") {
  ManualPurgatory<int> p;
  asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  auto later = p.purgatory.async_watch(op, {7, 8}, asio::deferred);
  CHECK(p.purgatory.watched() == 0);
  CHECK_FALSE(op->was_watched());
  std::move(later)(c.handler());
  CHECK(p.purgatory.watched() == 2);
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(8) == 1);
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{error_code(), Outcome::completed}});
}

TEST_CASE(
    "async_watch: refused (a null operation, no keys, watched already, after shutdown()): it "
    "throws, the handler is never called and the io_context keeps no work") {
  ManualPurgatory<int> p;
  asio::io_context io;
  Completions c{io, {}};
  CHECK_THROWS_AS(p.purgatory.async_watch(OperationRef(), {1}, c.handler()), std::invalid_argument);
  auto op = mock(1s);
  CHECK_THROWS_AS(p.purgatory.async_watch(op, std::span<const int>(), c.handler()),
                  std::invalid_argument);
  CHECK_FALSE(op->was_watched());
  p.purgatory.async_watch(op, {1}, c.handler());
  CHECK_THROWS_AS(p.purgatory.async_watch(op, {2}, c.handler()), OperationAlreadyWatched);
  auto late = mock(1s);
  p.purgatory.shutdown();
  io.poll();
  REQUIRE(c.seen.size() == 1);  // the watched one, shut down
  CHECK(c.seen[0] == Seen{error_code(), Outcome::shut_down});
  CHECK_THROWS_AS(p.purgatory.async_watch(late, {1}, c.handler()), PurgatoryShutDown);
  io.restart();
  CHECK(io.run_for(10s) == 0);  // nothing left: run() returns at once
  CHECK(c.seen.size() == 1);
  CHECK(late->outcome() == Outcome::pending);
}

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
using namespace asio::experimental::awaitable_operators;

TEST_CASE(
    "async_watch: with use_awaitable, co_await gives the outcome, and a refusal throws there") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = mock(1s);
  Outcome got = Outcome::pending;
  bool refused = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        got = co_await p.purgatory.async_watch(op, 1, asio::use_awaitable);
        try {
          (void)co_await p.purgatory.async_watch(op, 1, asio::use_awaitable);
        } catch (const OperationAlreadyWatched&) {
          refused = true;
        }
      },
      asio::detached);
  io.poll();
  CHECK(p.purgatory.watched() == 1);
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  io.poll();
  CHECK(got == Outcome::completed);
  CHECK(refused);
}

TEST_CASE(
    "async_watch: a co_spawn'ed coroutine cancelled through its completion token's slot cancels "
    "the operation it awaits, redirect_error gets operation_aborted") {
  ManualPurgatory<int> p;
  asio::io_context io;
  asio::cancellation_signal cancel;
  auto op = mock(1h);
  error_code ec;
  Outcome got = Outcome::pending;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        got =
            co_await p.purgatory.async_watch(op, 1, asio::redirect_error(asio::use_awaitable, ec));
      },
      asio::bind_cancellation_slot(cancel.slot(), asio::detached));
  io.poll();
  REQUIRE(p.purgatory.watched() == 1);
  cancel.emit(asio::cancellation_type::terminal);
  io.poll();
  CHECK(ec == kAborted);
  CHECK(got == Outcome::cancelled);
  CHECK(op->completions == 1);
  CHECK(p.purgatory.watched() == 0);
}

TEST_CASE(
    "async_watch: raced against a steady_timer with the awaitable operators, the loser is "
    "cancelled: the operation leaves its key, outcome cancelled") {
  asio::io_context io;
  AsioTimer timer(io);
  DelayedOperationPurgatory<int> waits(timer);
  auto op = mock(1h);
  bool timer_won = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer short_wait(io, 5ms);
        auto which = co_await (waits.async_watch(op, 1, asio::use_awaitable) ||
                               short_wait.async_wait(asio::use_awaitable));
        timer_won = which.index() == 1;
      },
      asio::detached);
  (void)io.run_for(30s);
  CHECK(io.stopped());  // returned by itself: the cancelled operation left the timer empty
  CHECK(timer_won);
  CHECK(op->outcome() == Outcome::cancelled);
  CHECK(op->completions == 1);
  CHECK(waits.watched() == 0);
}
#endif

TEST_CASE(
    "async_watch: cancellation racing completion and expiry, two io threads: each of 2000 "
    "operations gets exactly one outcome, on_complete() once, the handler once and agreeing") {
  asio::io_context io;
  AsioTimer timer(io);
  DelayedOperationPurgatory<int> waits(timer, {.name = "race", .shards = 4});
  auto strand = asio::make_strand(io);
  auto work = asio::make_work_guard(io);
  std::thread a([&] { io.run(); });
  std::thread b([&] { io.run(); });

  constexpr int kOps = 2000;
  struct Round {
    MockRef op;
    asio::cancellation_signal cancel;  // used on the strand only
    std::atomic<int> handled{0};
    std::atomic<bool> agrees{false};
  };
  std::vector<std::unique_ptr<Round>> rounds;
  std::atomic<int> handled{0};
  std::mt19937 rng(20261203);
  for (int i = 0; i < kOps; ++i) {
    auto& r = *rounds.emplace_back(std::make_unique<Round>());
    r.op = mock(std::chrono::microseconds(rng() % 1500));
    asio::post(strand, [&, i] {
      waits.async_watch(
          r.op, {i},
          asio::bind_cancellation_slot(r.cancel.slot(),
                                       asio::bind_executor(strand, [&](error_code ec, Outcome o) {
                                         r.agrees = (o == Outcome::cancelled) == (ec == kAborted) &&
                                                    o == r.op->outcome() && o != Outcome::pending;
                                         r.handled.fetch_add(1);
                                         handled.fetch_add(1);
                                       })));
    });
    const auto spin = std::chrono::microseconds(rng() % 1500);
    const bool cancel_first = (rng() & 1) != 0;
    const auto pause = [spin] {
      const auto until = std::chrono::steady_clock::now() + spin;
      while (std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    };
    if (cancel_first) pause();
    asio::post(strand, [&r] { r.cancel.emit(asio::cancellation_type::terminal); });
    if (!cancel_first) pause();
    r.op->completable = true;
    (void)waits.check_and_complete(i);
  }
  CHECK(eventually([&] { return handled.load() == kOps; }, 60s));
  work.reset();
  a.join();
  b.join();
  int by_outcome[5] = {};
  int wrong = 0;
  for (const auto& r : rounds) {
    wrong += r->handled == 1 && r->agrees && r->op->completions == 1 ? 0 : 1;
    ++by_outcome[static_cast<int>(r->op->outcome())];
  }
  MESSAGE("completed " << by_outcome[1] << ", expired " << by_outcome[2] << ", cancelled "
                       << by_outcome[4]);
  CHECK(wrong == 0);
  CHECK(by_outcome[0] == 0);
  CHECK(by_outcome[4] > 0);                  // the cancellations raced and won some
  CHECK(by_outcome[1] + by_outcome[2] > 0);  // and lost some
  CHECK(waits.watched() == 0);
  const PurgatoryMetrics m = waits.metrics();
  CHECK(m.completed_total + m.expired_total + m.cancelled_total == kOps);
}

TEST_CASE(
    "async_watch: an io_context running only an AsioTimer and a purgatory returns from run() by "
    "itself once the last of 40 operations ended (20 completed early, 20 expired): no reset, no "
    "stop(), each handler once") {
  asio::io_context io;
  AsioTimer timer(io);
  DelayedOperationPurgatory<int> waits(timer);
  constexpr int kOps = 40;
  std::vector<MockRef> ops;
  std::vector<int> handled(kOps, 0);
  std::vector<Outcome> outcome(kOps, Outcome::pending);
  for (int i = 0; i < kOps; ++i) {
    // Even ones wait an hour and are completed by a check; odd ones expire after 5..44 ms.
    ops.push_back(mock(i % 2 == 0 ? std::chrono::hours(1) : std::chrono::milliseconds(5 + i)));
    waits.async_watch(ops.back(), i, asio::bind_executor(io, [&, i](error_code ec, Outcome o) {
                        CHECK_FALSE(ec);
                        ++handled[static_cast<std::size_t>(i)];
                        outcome[static_cast<std::size_t>(i)] = o;
                      }));
  }
  // The checks come from a task on the same timer: the io_context has no other work.
  timer.add(make_task([&] {
              for (int i = 0; i < kOps; i += 2) {
                ops[static_cast<std::size_t>(i)]->completable = true;
                CHECK(waits.check_and_complete(i) == 1);
              }
            }),
            std::chrono::milliseconds(20));
  const auto started = std::chrono::steady_clock::now();
  (void)io.run_for(std::chrono::seconds(60));
  CHECK(io.stopped());  // ran out of work: returned by itself
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  for (int i = 0; i < kOps; ++i) {
    CAPTURE(i);
    CHECK(handled[static_cast<std::size_t>(i)] == 1);
    CHECK(outcome[static_cast<std::size_t>(i)] ==
          (i % 2 == 0 ? Outcome::completed : Outcome::expired));
  }
  CHECK(waits.watched() == 0);
  CHECK(timer.size() == 0);
}

}  // namespace
}  // namespace purgatory::test
