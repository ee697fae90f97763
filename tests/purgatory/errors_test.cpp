// errors.hpp: the purgatory layer's exceptions, and "a user callback's exception never escapes into
// the library's threads".
#include "purgatory/errors.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include "contract_support.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "errors.hpp: OperationAlreadyWatched and PurgatoryShutDown are std::logic_error naming the "
    "purgatory (and the call)") {
  static_assert(std::is_base_of_v<std::logic_error, OperationAlreadyWatched>);
  static_assert(std::is_base_of_v<std::logic_error, PurgatoryShutDown>);
  const OperationAlreadyWatched watched("fetch");
  CHECK(std::string(watched.what()).find("fetch") != std::string::npos);
  const PurgatoryShutDown shut("produce", "check_and_complete");
  CHECK(std::string(shut.what()).find("produce") != std::string::npos);
  CHECK(std::string(shut.what()).find("check_and_complete") != std::string::npos);
}

TEST_CASE(
    "errors.hpp: an operation is watched at most once in its life: OperationAlreadyWatched from "
    "the same or another purgatory, also after it completed") {
  ManualPurgatory<int> a;
  ManualPurgatory<int> b;
  auto op = probe(1s);
  a.purgatory.try_complete_else_watch(op, {1});
  CHECK_THROWS_AS(b.purgatory.try_complete_else_watch(op, {1}), OperationAlreadyWatched);
  a.advance(1s);
  CHECK(op->outcome() == Outcome::expired);
  CHECK_THROWS_AS(a.purgatory.try_complete_else_watch(op, {1}), OperationAlreadyWatched);
  CHECK(op->completions == 1);
}

TEST_CASE(
    "errors.hpp: PurgatoryShutDown while shutdown() runs: nothing new may be watched or checked") {
  ManualPurgatory<int> p(TimerOptions::Concurrency::thread_safe);
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1});
  HeldInCallback shutter(*op, [&] { p.purgatory.shutdown(); });
  REQUIRE(shutter.entered());  // shutdown() has begun and waits for this callback
  auto late = probe(1s);
  CHECK_THROWS_AS(p.purgatory.try_complete_else_watch(late, {2}), PurgatoryShutDown);
  CHECK_THROWS_AS(p.purgatory.check_and_complete(1), PurgatoryShutDown);
  CHECK_THROWS_AS(p.purgatory.cancel_for_key(1), PurgatoryShutDown);
  CHECK_FALSE(late->was_watched());
  shutter.release();
}

TEST_CASE(
    "errors.hpp: a user callback's exception never escapes into the library's threads: it goes to "
    "the CallbackErrorHandler and the timer's threads keep running (real timer)") {
  std::mutex mu;
  std::vector<std::string> where;  // guarded by mu
  PurgatoryOptions options;
  options.name = "throwing";
  options.on_callback_error = [&](const DelayedOperation&, std::exception_ptr, std::string_view w) {
    const std::lock_guard<std::mutex> lock(mu);
    where.emplace_back(w);
  };
  DelayedOperationPurgatory<int> p(options);  // its own reaper and executor threads
  auto thrower = make_operation(
      2ms, [] { return false; }, [] { throw std::runtime_error("on_complete"); },
      [] { throw std::runtime_error("on_expiration"); });
  std::atomic<bool> second_expired{false};
  auto second = make_operation(
      20ms, [] { return false; }, [&](Outcome o) { second_expired = o == Outcome::expired; });
  p.try_complete_else_watch(thrower, {1});
  p.try_complete_else_watch(second, {2});
  CHECK(eventually([&] { return second_expired.load(); }));
  const std::lock_guard<std::mutex> lock(mu);
  REQUIRE(where.size() == 2);
  CHECK(where[0] == "on_complete");
  CHECK(where[1] == "on_expiration");
}

}  // namespace
}  // namespace purgatory::test
