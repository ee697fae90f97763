#include "purgatory/asio.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif
#include <string>
#include <thread>
#include <utility>
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

#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

using boost::system::error_code;
using Seen = std::pair<error_code, Outcome>;
const error_code kAborted = boost::asio::error::operation_aborted;

// Records every completion of the waits it hands out; the handlers run on `io`.
struct Completions {
  boost::asio::io_context& io;
  std::vector<Seen> seen;

  auto handler() {
    return boost::asio::bind_executor(
        io, [this](error_code ec, Outcome outcome) { seen.emplace_back(ec, outcome); });
  }
};

// A MockOperation that says when it is destroyed.
class TrackedOperation final : public MockOperation {
 public:
  TrackedOperation(Nanos timeout, std::atomic<bool>& destroyed)
      : MockOperation(timeout), destroyed_(destroyed) {}
  ~TrackedOperation() override { destroyed_ = true; }

 private:
  std::atomic<bool>& destroyed_;
};

TEST_CASE("async_wait_outcome: a check completes it early: (no error, completed) once, posted") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  async_wait_outcome(op, c.handler());
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  CHECK(c.seen.empty());  // posted, not run on the completing thread
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{error_code(), Outcome::completed}});
  CHECK(op->completions == 1);
}

TEST_CASE("async_wait_outcome: the 50 ms timeout passes: (no error, expired)") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  Completions c{io, {}};
  auto op = mock(50ms);
  p.purgatory.try_complete_else_watch(op, {1});
  async_wait_outcome(op, c.handler());
  p.advance(49ms);
  io.poll();
  CHECK(c.seen.empty());
  p.advance(1ms);
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{error_code(), Outcome::expired}});
  CHECK(op->expirations == 1);
}

TEST_CASE("async_wait_outcome with use_future: the future holds the outcome (shut_down)") {
  ManualPurgatory<int> p;
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  std::future<Outcome> outcome = async_wait_outcome(op, boost::asio::use_future);
  CHECK(outcome.wait_for(0s) == std::future_status::timeout);
  p.purgatory.shutdown();
  REQUIRE(outcome.wait_for(10s) == std::future_status::ready);
  CHECK(outcome.get() == Outcome::shut_down);
}

#if defined(__cpp_lib_jthread)
TEST_CASE("async_wait_outcome: a stop request withdraws the operation from the purgatory") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1, 2});
  std::stop_source stop;
  async_wait_outcome(op, stop.get_token(), c.handler());
  CHECK(p.purgatory.watched() == 2);
  stop.request_stop();
  // Gone from both keys and from the timer, no outcome decided, no callback run.
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.manual.timer->size() == 0);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
  CHECK(op->outcome() == Outcome::pending);
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 0);
  p.advance(2s);
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{kAborted, Outcome::pending}});
  CHECK(op->completions == 0);
  CHECK(op->expirations == 0);
}

TEST_CASE("async_wait_outcome: a stop after the outcome changes nothing") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  std::stop_source stop;
  async_wait_outcome(op, stop.get_token(), c.handler());
  CHECK(op->force_complete());
  stop.request_stop();
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{error_code(), Outcome::completed}});
  CHECK(p.purgatory.metrics().cancelled_total == 0);
}

TEST_CASE("async_wait_outcome: a stop requested before the call withdraws it at once") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  std::stop_source stop;
  stop.request_stop();
  async_wait_outcome(op, stop.get_token(), c.handler());
  CHECK(p.purgatory.watched() == 0);
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{kAborted, Outcome::pending}});
}

TEST_CASE("async_wait_outcome: stopping the wait of an unwatched operation only ends the wait") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  std::stop_source stop;
  async_wait_outcome(op, stop.get_token(), c.handler());
  stop.request_stop();
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{kAborted, Outcome::pending}});
  // The operation itself goes on; its outcome reaches nobody a second time.
  op->completable = true;
  CHECK(p.purgatory.try_complete_else_watch(op, {1}));
  io.poll();
  CHECK(op->completions == 1);
  CHECK(c.seen.size() == 1);
}

TEST_CASE("async_wait_outcome: a cancelled wait lets the operation go when its owner drops it") {
  std::atomic<bool> destroyed{false};
  {
    ManualPurgatory<int> p;
    boost::asio::io_context io;
    Completions c{io, {}};
    OperationRef op(new TrackedOperation(1s, destroyed));
    p.purgatory.try_complete_else_watch(op, {1});
    std::stop_source stop;
    async_wait_outcome(op, stop.get_token(), c.handler());
    stop.request_stop();
    io.poll();
    REQUIRE(c.seen.size() == 1);
    op.reset();
    CHECK(destroyed);  // neither the wait nor the purgatory kept a reference
  }
  CHECK(destroyed);
}
#else
TEST_CASE(
    "async_wait_outcome: the std::stop_token forms are left out: this standard library has no "
    "<stop_token>") {
  MESSAGE(
      "no <stop_token> (__cpp_lib_jthread): the std::stop_token overloads and their tests "
      "are not built");
}
#endif  // __cpp_lib_jthread

TEST_CASE("async_wait_outcome: a second wait on one operation throws, its handler never runs") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  async_wait_outcome(op, c.handler());
  CHECK_THROWS_AS(async_wait_outcome(op, c.handler()), std::logic_error);
  CHECK_THROWS_AS(async_wait_outcome(OperationRef(), c.handler()), std::invalid_argument);
  p.purgatory.shutdown();
  io.run();
  CHECK(c.seen == std::vector<Seen>{{error_code(), Outcome::shut_down}});
}

#if defined(__cpp_lib_jthread)
TEST_CASE("async_wait_outcome: 1000 waits raced by checks, timeouts and stops end once each") {
  // Invariants: every wait completes exactly once; a successful one reports the operation's own
  // outcome, an aborted one Outcome::pending; every operation leaves the purgatory exactly once
  // (completed + expired + cancelled == 1000) and nothing stays watched.
  constexpr int kOps = 1000;
  PurgatoryOptions options;
  options.name = "async-race";
  DelayedOperationPurgatory<int> purgatory(options);
  boost::asio::io_context io;
  std::vector<MockRef> ops;
  std::vector<std::stop_source> stops(kOps);
  std::vector<std::vector<Seen>> seen(kOps);  // io thread only
  for (int i = 0; i < kOps; ++i)
    ops.push_back(mock(std::chrono::microseconds(500 + (i * 37) % 20'000)));
  // Stops (every other operation) and checks (every third) run backwards from the last one,
  // landing before, during and after the calls below, and around the timeouts.
  std::thread canceller([&] {
    for (int i = kOps - 2; i >= 0; i -= 2)
      stops[i].request_stop();
  });
  std::thread completer([&] {
    for (int i = kOps - 1; i >= 0; --i) {
      if (i % 3 != 0) continue;
      ops[i]->completable = true;
      (void)purgatory.check_and_complete(i % 10);
    }
  });
  for (int i = 0; i < kOps; ++i) {
    purgatory.try_complete_else_watch(ops[i], {i % 10});
    async_wait_outcome(ops[i], stops[i].get_token(),
                       boost::asio::bind_executor(io, [&seen, i](error_code ec, Outcome o) {
                         seen[i].emplace_back(ec, o);
                       }));
  }
  io.run();
  completer.join();
  canceller.join();
  for (int i = 0; i < kOps; ++i) {
    REQUIRE_MESSAGE(seen[i].size() == 1, "wait ", i);
    const auto [ec, outcome] = seen[i].front();
    if (ec) {
      CHECK(ec == kAborted);
      CHECK(outcome == Outcome::pending);
    } else {
      CHECK(outcome == ops[i]->outcome());
      CHECK(outcome != Outcome::pending);
    }
  }
  const PurgatoryMetrics m = purgatory.metrics();
  CHECK(m.completed_total + m.expired_total + m.cancelled_total == kOps);
  CHECK(m.watched == 0);
  CHECK(m.delayed == 0);
}
#endif  // __cpp_lib_jthread

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#if defined(__cpp_lib_jthread)
TEST_CASE("co_await async_wait_outcome(use_awaitable): completed resumes, stopped is aborted") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto completed = mock(1s);
  auto cancelled = mock(1s);
  p.purgatory.try_complete_else_watch(completed, {1});
  p.purgatory.try_complete_else_watch(cancelled, {2});
  std::stop_source stop;
  Outcome first = Outcome::pending;
  error_code second_ec;
  Outcome second = Outcome::shut_down;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        first = co_await async_wait_outcome(completed, boost::asio::use_awaitable);
      },
      boost::asio::detached);
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        second = co_await async_wait_outcome(
            cancelled, stop.get_token(),
            boost::asio::redirect_error(boost::asio::use_awaitable, second_ec));
      },
      boost::asio::detached);
  io.poll();  // both coroutines are now suspended in their waits
  stop.request_stop();
  completed->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  io.run();
  CHECK(first == Outcome::completed);
  CHECK(second_ec == kAborted);
  CHECK(second == Outcome::pending);
  CHECK(p.purgatory.watched() == 0);
  CHECK(cancelled->completions == 0);
}
#endif  // __cpp_lib_jthread
#endif

#if BOOST_VERSION >= 107700
TEST_CASE("async_wait_outcome: emitting a bound cancellation slot withdraws it (Boost >= 1.77)") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  Completions c{io, {}};
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  boost::asio::cancellation_signal signal;
  async_wait_outcome(op, boost::asio::bind_cancellation_slot(signal.slot(), c.handler()));
  signal.emit(boost::asio::cancellation_type::terminal);
  CHECK(p.purgatory.watched() == 0);
  io.poll();
  CHECK(c.seen == std::vector<Seen>{{kAborted, Outcome::pending}});
}
#endif

}  // namespace
}  // namespace purgatory::test
