#include "purgatory/asio.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif
#include <doctest/doctest.h>

#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

TEST_CASE("async_wait_outcome: the handler is posted to its executor after the callbacks") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = mock(50ms);
  p.purgatory.try_complete_else_watch(op, {1});
  Outcome seen = Outcome::pending;
  int completions_when_called = -1;
  async_wait_outcome(op,
                     boost::asio::bind_executor(io, [&](boost::system::error_code ec, Outcome o) {
                       CHECK(!ec);
                       seen = o;
                       completions_when_called = op->completions;
                     }));
  p.advance(50ms);
  CHECK(seen == Outcome::pending);  // posted, not run inline on the expiring thread
  io.run();
  CHECK(seen == Outcome::expired);
  CHECK(completions_when_called == 1);
}

TEST_CASE("async_wait_outcome keeps io_context::run() busy until the outcome arrives") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  std::atomic<bool> called{false};
  async_wait_outcome(op,
                     boost::asio::bind_executor(io, [&](boost::system::error_code ec, Outcome o) {
                       CHECK(!ec);
                       CHECK(o == Outcome::completed);
                       called = true;
                     }));
  std::thread completer([&] {
    std::this_thread::sleep_for(5ms);
    op->completable = true;
    p.purgatory.check_and_complete(1);
  });
  io.run();  // returns only once the handler ran
  completer.join();
  CHECK(called);
}

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
TEST_CASE("co_await async_wait_outcome(op with use_awaitable) resumes with the outcome") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = mock(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  Outcome seen = Outcome::pending;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        seen = co_await async_wait_outcome(op, boost::asio::use_awaitable);
      },
      boost::asio::detached);
  io.poll();
  CHECK(seen == Outcome::pending);
  p.purgatory.shutdown();
  io.run();
  CHECK(seen == Outcome::shut_down);
}
#endif

}  // namespace
}  // namespace purgatory::test
