// purgatory/asio.hpp: async_watch()'s cancellation racing checks and the expiry, on the hooked
// libraries at their named race points. The rest of the header's promises:
// tests/purgatory/asio_test.cpp.
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
#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "asio.hpp: cancellations racing checks and the expiry (seeded schedule): exactly one outcome, "
    "a cancelled one reaches the handler as (operation_aborted, cancelled), any other as itself") {
  const int n = rounds(200, 40);
  int cancelled = 0;
  std::uint64_t request_hits = 0;
  for_each_seed(n, [&](std::uint64_t round, std::uint64_t seed) {
    ManualPurgatory<int> p;
    asio::io_context io;
    auto op = probe(2ms);
    asio::cancellation_signal cancel;
    Received r;
    p.purgatory.async_watch(op, {1}, cancellable(cancel, io.get_executor(), r));
    op->completable = true;
    {
      RaceSchedule schedule({.seed = seed, .pause_probability = 0.5, .max_pause = 40us});
      // One round in three cancels first (then the checks and the expiry find it decided); the
      // others race the cancellation against them. The handler runs later, on io: the signal is
      // never emitted while its slot is cleared.
      const bool cancel_first = round % 3 == 0;
      if (cancel_first) cancel.emit(asio::cancellation_type::terminal);
      std::thread checker([&] { (void)p.purgatory.check_and_complete(1); });
      std::thread clock([&] { p.advance(2ms); });
      std::this_thread::sleep_for(
          std::chrono::microseconds(seed % 2 == 0 ? seed % 30 : seed % 300));
      if (!cancel_first) cancel.emit(asio::cancellation_type::terminal);
      checker.join();
      clock.join();
      request_hits += schedule.hits("OutcomeWait::request_cancel");
    }
    p.purgatory.shutdown();
    io.run();
    REQUIRE(r.calls == 1);
    CHECK(op->completions == 1);
    CHECK(r.outcome == op->outcome());
    if (r.outcome == Outcome::cancelled) {
      ++cancelled;
      CHECK(r.ec == kAborted);
    } else {
      CHECK_FALSE(r.ec);
    }
  });
  MESSAGE("cancelled " << cancelled << " of " << n);
  CHECK(cancelled > 0);
  CHECK(cancelled < n);
  CHECK(request_hits > 0);
}

TEST_CASE(
    "asio.hpp: a cancellation that finds the timeout firing changes nothing: the wait completes "
    "with Outcome::expired") {
  ManualPurgatory<int> p;
  asio::io_context io;
  auto op = probe(5ms);
  asio::cancellation_signal cancel;
  Received r;
  p.purgatory.async_watch(op, {1}, cancellable(cancel, io.get_executor(), r, op.get()));
  RaceSchedule schedule(RaceSchedule::at_each(
      "DelayedOperation::complete_with: still pending",
      [&] { on_another_thread([&] { cancel.emit(asio::cancellation_type::terminal); }); }));
  p.advance(5ms);  // the expiry starts, and the cancellation comes before it takes the lock
  CHECK(schedule.hits("complete_with: still pending") == 1);
  CHECK(schedule.hits("OutcomeWait::request_cancel") == 1);
  io.run();
  CHECK(r.calls == 1);
  CHECK_FALSE(r.ec);
  CHECK(r.outcome == Outcome::expired);
  CHECK(op->expirations == 1);
  CHECK(p.purgatory.metrics().cancelled_total == 0);
}

}  // namespace

}  // namespace purgatory::test
