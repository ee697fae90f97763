// purgatory_metrics.hpp: PurgatoryMetrics, CallbackErrorHandler and PurgatoryOptions.
#include "purgatory/purgatory_metrics.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "purgatory_metrics.hpp: the gauges and totals: watched and delayed now, completed (by "
    "try_complete or force_complete, also on the first try), expired, shut_down and cancelled "
    "(handed back) totals, named after the purgatory") {
  PurgatoryOptions options;
  options.name = "Fetch";
  ManualPurgatory<int> p(options);
  auto by_check = probe(1s);
  auto by_force = probe(1s);
  auto at_once = probe(1s);
  auto by_timeout = probe(10ms);
  auto handed = probe(1s);
  auto by_shutdown = probe(1s);
  at_once->completable = true;
  p.purgatory.try_complete_else_watch(by_check, {1, 2});
  p.purgatory.try_complete_else_watch(by_force, {3});
  p.purgatory.try_complete_else_watch(at_once, {4});
  p.purgatory.try_complete_else_watch(by_timeout, {5, 6, 7});
  p.purgatory.try_complete_else_watch(handed, {8});
  p.purgatory.try_complete_else_watch(by_shutdown, {9});
  auto m = p.purgatory.metrics();
  CHECK(m.name == "Fetch");
  CHECK(m.watched == 8);  // pairs: 2 + 1 + 3 + 1 + 1
  CHECK(m.delayed == 5);
  CHECK(m.completed_total == 1);  // at_once
  by_check->completable = true;
  CHECK(p.purgatory.check_and_complete(2) == 1);
  CHECK(by_force->force_complete());
  p.advance(10ms);
  CHECK(p.purgatory.cancel_for_key(8).size() == 1);
  CHECK(handed->force_complete());  // the caller's: not the purgatory's to count
  m = p.purgatory.metrics();
  CHECK(m.watched == 1);
  CHECK(m.delayed == 1);
  CHECK(m.completed_total == 3);
  CHECK(m.expired_total == 1);
  CHECK(m.cancelled_total == 1);
  CHECK(m.shut_down_total == 0);
  p.purgatory.shutdown();
  m = p.purgatory.metrics();
  CHECK(m.shut_down_total == 1);
  CHECK(m.watched == 0);
  CHECK(m.delayed == 0);
}

TEST_CASE(
    "purgatory_metrics.hpp: waited: from watch to outcome, over every outcome (completed, "
    "expired, shut down, not the handed back), as a summary and every bucket with the sum") {
  ManualPurgatory<int> p;
  auto completed = probe(1s);
  auto expired = probe(30ms);
  auto shut = probe(1s);
  auto handed = probe(1s);
  p.purgatory.try_complete_else_watch(completed, {1});
  p.purgatory.try_complete_else_watch(expired, {2});
  p.purgatory.try_complete_else_watch(handed, {4});
  p.advance(10ms);
  p.purgatory.try_complete_else_watch(shut, {3});  // watched 10 ms later
  p.advance(10ms);
  CHECK(completed->force_complete());  // waited 20 ms
  p.advance(10ms);                     // expired waited 30 ms
  CHECK(p.purgatory.cancel_for_key(4).size() == 1);
  p.advance(20ms);
  p.purgatory.shutdown();  // shut waited 40 ms
  const auto m = p.purgatory.metrics();
  CHECK(m.waited.count == 3);
  CHECK(m.waited_histogram.count() == 3);
  CHECK(m.waited.max == 40ms);
  CHECK(m.waited_histogram.sum_ns == static_cast<std::uint64_t>(Nanos(90ms).count()));
  CHECK(m.waited_histogram.count_at_most(20ms) <= 1);
  CHECK(m.waited_histogram.count_at_most(23ms) >= 1);
  CHECK(m.waited_histogram.count_at_most(46ms) == 3);
  CHECK(m.waited.p50 >= 30ms);
  CHECK(m.waited.p50 <= Nanos(30ms) * 1125 / 1000);
}

TEST_CASE(
    "purgatory_metrics.hpp: a snapshot read while others complete operations: each total only "
    "grows between reads, and the final one is exact") {
  ManualPurgatory<int> p;
  std::atomic<bool> done{false};
  bool shrank = false;
  std::thread reader([&] {
    PurgatoryMetrics last;
    while (!done.load()) {
      const PurgatoryMetrics m = p.purgatory.metrics();
      if (m.completed_total < last.completed_total || m.waited.count < last.waited.count) {
        shrank = true;
      }
      last = m;
    }
  });
  const int n = contract::rounds(3000, 500);
  for (int i = 0; i < n; ++i) {
    auto op = probe(1s);
    p.purgatory.try_complete_else_watch(op, {i % 7});
    CHECK(op->force_complete());
  }
  done = true;
  reader.join();
  CHECK_FALSE(shrank);
  CHECK(p.purgatory.metrics().completed_total == static_cast<std::uint64_t>(n));
  CHECK(p.purgatory.metrics().waited.count == static_cast<std::uint64_t>(n));
}

TEST_CASE(
    "purgatory_metrics.hpp: CallbackErrorHandler: `where` names the callback, called on the "
    "thread that ran it, with no lock of the operation held (on_complete, on_expiration)") {
  struct Call {
    std::string where;
    std::thread::id thread;
    bool lock_held;
  };
  std::vector<Call> calls;
  PurgatoryOptions options;
  options.on_callback_error = [&](const DelayedOperation& op, std::exception_ptr,
                                  std::string_view where) {
    calls.push_back(
        {std::string(where), std::this_thread::get_id(), op.lock_held_by_current_thread()});
  };
  ManualPurgatory<int> p(TimerOptions::Concurrency::thread_safe, options);
  auto op = make_operation(
      10ms, [] { return false; }, [] { throw std::runtime_error("c"); },
      [] { throw std::runtime_error("e"); });
  p.purgatory.try_complete_else_watch(op, {1});
  std::thread::id expiry_thread;
  on_another_thread([&] {
    expiry_thread = std::this_thread::get_id();
    p.advance(10ms);
  });
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].where == "on_complete");
  CHECK(calls[1].where == "on_expiration");
  for (const Call& c : calls) {
    CHECK(c.thread == expiry_thread);
    CHECK_FALSE(c.lock_held);
  }
}

TEST_CASE(
    "purgatory_metrics.hpp: CallbackErrorHandler for try_complete(): called with no lock held") {
  bool lock_held = false;
  std::string where;
  PurgatoryOptions options;
  options.on_callback_error = [&](const DelayedOperation& op, std::exception_ptr,
                                  std::string_view w) {
    where = std::string(w);
    lock_held = op.lock_held_by_current_thread();
  };
  ManualPurgatory<int> p(options);
  bool fail = false;
  auto op = make_operation(
      1s,
      [&]() -> bool {
        if (fail) throw std::runtime_error("condition broke");
        return false;
      },
      [] {});
  p.purgatory.try_complete_else_watch(op, {1});
  fail = true;
  (void)p.purgatory.check_and_complete(1);
  CHECK(where == "try_complete");
  CHECK_FALSE(lock_held);
}

TEST_CASE(
    "purgatory_metrics.hpp: PurgatoryOptions: name names the metrics and the errors, a null "
    "on_callback_error prints to stderr, shards are rounded up to a power of two") {
  PurgatoryOptions options;
  options.name = "DeleteRecords";
  options.shards = 3;
  ManualPurgatory<int> p(options);
  CHECK(p.purgatory.metrics().name == "DeleteRecords");
  CHECK(p.purgatory.shard_count() == 4);
  CHECK(PurgatoryOptions{}.shards == 16);
  CHECK(PurgatoryOptions{}.name == "purgatory");
  auto op = make_operation(
      1s, [] { return false; }, [] { throw std::runtime_error("lost the log"); });
  p.purgatory.try_complete_else_watch(op, {1});
  contract::StderrCapture err;
  CHECK(op->force_complete());
  const std::string text = err.text();
  CHECK(text.find("DeleteRecords") != std::string::npos);
  CHECK(text.find("on_complete") != std::string::npos);
  CHECK(text.find("lost the log") != std::string::npos);
}

}  // namespace
}  // namespace purgatory::test
