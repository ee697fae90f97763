// The Asio adapters' promises that once did not hold under a race: each test fails with its fix
// reverted, on the hooked libraries' race points.
#include "purgatory/asio.hpp"

#include <atomic>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif
#include <thread>

#include <doctest/doctest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include "contract_support.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "race_schedule.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "regression: async_watch cancelled through its cancellation slot: once the "
    "handler has (operation_aborted, cancelled), a check already under way does not complete the "
    "operation") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  auto op = mock(1s);
  boost::asio::cancellation_signal cancel;
  boost::system::error_code got_ec;
  Outcome got = Outcome::completed;
  p.purgatory.async_watch(op, {1},
                          boost::asio::bind_cancellation_slot(
                              cancel.slot(), boost::asio::bind_executor(
                                                 io, [&](boost::system::error_code ec, Outcome o) {
                                                   got_ec = ec;
                                                   got = o;
                                                 })));
  op->completable = true;  // any check that reaches it would complete it
  HeldCheck check(p.purgatory, 1);
  REQUIRE(check.copied());
  cancel.emit(boost::asio::cancellation_type::terminal);
  io.run();
  CHECK(got_ec == boost::asio::error::operation_aborted);
  CHECK(got == Outcome::cancelled);
  const std::size_t completed = check.release();
  CHECK(completed == 0);
  CHECK(op->outcome() == Outcome::cancelled);
  CHECK(op->completions == 1);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
}

}  // namespace
}  // namespace purgatory::test
