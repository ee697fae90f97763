// The Asio adapters' promises that once did not hold: each test fails with its fix reverted.
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

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "regression: async_watch with a plain lambda: the handler runs on Asio's "
    "system executor, not on the thread that completed the operation") {
  ManualPurgatory<int> p;
  auto op = mock(1s);
  Signal called;
  std::atomic<bool> on_completing_thread{true};
  const auto completing_thread = std::this_thread::get_id();
  p.purgatory.async_watch(op, {1}, [&](boost::system::error_code ec, Outcome o) {
    CHECK(!ec);
    CHECK(o == Outcome::completed);
    on_completing_thread = std::this_thread::get_id() == completing_thread;
    called.set();
  });
  CHECK(op->force_complete());
  REQUIRE(called.wait());
  CHECK_FALSE(on_completing_thread.load());
}

}  // namespace
}  // namespace purgatory::test
