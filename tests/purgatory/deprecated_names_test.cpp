// Version 0.1's names, kept as [[deprecated]] aliases and overloads for version 0.2: code written
// against 0.1 still compiles (with warnings, silenced here) and still works.
#include "purgatory/purgatory_metrics.hpp"  // 0.1 declared PurgatoryOptions here

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif

#include <doctest/doctest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/smart_ptr/intrusive_ptr.hpp>

#include "purgatory/asio.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/operation_lock.hpp"
#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/periodic_task.hpp"
#include "purgatory/timer/timer_task_list.hpp"
#include "purgatory/timer/timing_wheel.hpp"
#include "purgatory_test_support.hpp"

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

namespace purgatory::test {
namespace {

static_assert(std::is_same_v<purgatory::TimingWheel, detail::TimingWheel>);
static_assert(std::is_same_v<purgatory::TimerTaskList, detail::TimerTaskList>);
static_assert(std::is_same_v<purgatory::ClockWaiter, detail::ClockWaiter>);
static_assert(std::is_same_v<purgatory::OperationLock, detail::OperationLock>);
static_assert(std::is_same_v<purgatory::OutcomeListener, detail::OutcomeListener>);
static_assert(std::is_same_v<purgatory::NoExpirationCallback, detail::NoCallback>);

struct Flush final : TimerTask {
  std::atomic<int> runs{0};
  void run() override { ++runs; }
};

TEST_CASE("0.1 names: tasks in boost::intrusive_ptr, add() and add_at() taking them") {
  ManualTimer m;
  boost::intrusive_ptr<Flush> flush(new Flush);  // 0.1: make_task<T>() returned this type
  boost::intrusive_ptr<Flush> made = make_task<Flush>();
  m.timer.add(flush, 1ms);
  m.timer.add_at(made, m.clock.now() + 1ms);
  boost::intrusive_ptr<PeriodicTask> beat = make_periodic([] {});
  CHECK(beat);
  m.advance(1ms);
  CHECK(flush->runs == 1);
  CHECK(made->runs == 1);
  const TaskRef as_ref = flush;  // and back
  CHECK(as_ref.get() == flush.get());
}

TEST_CASE("0.1 names: AsioDriver drives a SystemTimer made with Driver::external") {
  boost::asio::io_context io;
  SystemTimer timer(TimerOptions{.name = "old",
                                 .executor = std::make_shared<AsioExecutor>(io.get_executor()),
                                 .driver = TimerOptions::Driver::external});
  AsioDriver driver(io.get_executor(), timer);
  int ran = 0;
  timer.add(make_task([&] { ++ran; }), 1ms);
  (void)io.run_for(30s);
  CHECK(io.stopped());
  CHECK(ran == 1);
}

class Old final : public DelayedOperation {
 public:
  explicit Old(Nanos timeout) : DelayedOperation(timeout) {}
  bool done = false;

 protected:
  bool try_complete() override { return done && force_complete(); }  // 0.1's idiom
  void on_complete() override {}
};

TEST_CASE(
    "0.1 names: operations in boost::intrusive_ptr, async_wait_outcome() and an outcome "
    "listener") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  boost::intrusive_ptr<Old> op(new Old(1s));
  p.purgatory.try_complete_else_watch(op, {1});  // through Ref's 0.1 conversion
  Outcome seen = Outcome::pending;
  async_wait_outcome(
      op, boost::asio::bind_executor(io, [&](boost::system::error_code, Outcome o) { seen = o; }));
  op->done = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  io.run();
  CHECK(seen == Outcome::completed);

  struct Listener final : OutcomeListener {
    Outcome& got;
    explicit Listener(Outcome& g) : got(g) {}
    void on_outcome(Outcome o) noexcept override { got = o; }
  };
  Outcome listened = Outcome::pending;
  auto other = make_operation(1s, [] { return false; });
  other->set_outcome_listener(std::make_unique<Listener>(listened));
  CHECK(other->force_complete());
  CHECK(listened == Outcome::completed);
#if defined(__cpp_lib_jthread)
  auto stopped = mock(1h);
  p.purgatory.try_complete_else_watch(stopped, {2});
  std::stop_source stop;
  Outcome after_stop = Outcome::pending;
  io.restart();
  async_wait_outcome(stopped, stop.get_token(),
                     boost::asio::bind_executor(
                         io, [&](boost::system::error_code, Outcome o) { after_stop = o; }));
  stop.request_stop();  // 0.2: cancels the operation
  io.run();
  CHECK(after_stop == Outcome::cancelled);
#endif
}

TEST_CASE(
    "asio.hpp: async_watch() of an operation another wait already listens to (0.1's listener or "
    "async_wait_outcome()) throws std::logic_error: not watched, the handler never called, the "
    "io_context keeps no work, and the first listener still hears the one outcome") {
  ManualPurgatory<int> p;
  boost::asio::io_context io;
  int handlers = 0;
  auto handler =
      boost::asio::bind_executor(io, [&](boost::system::error_code, Outcome) { ++handlers; });
  Outcome first = Outcome::pending;
  auto waited = mock(1s);
  async_wait_outcome(waited, boost::asio::bind_executor(
                                 io, [&](boost::system::error_code, Outcome o) { first = o; }));
  CHECK_THROWS_AS(p.purgatory.async_watch(waited, {1}, handler), std::logic_error);
  CHECK_FALSE(waited->was_watched());
  CHECK(p.purgatory.watched() == 0);

  struct Listener final : OutcomeListener {
    void on_outcome(Outcome) noexcept override {}
  };
  auto listened = mock(1s);
  listened->set_outcome_listener(std::make_unique<Listener>());
  CHECK_THROWS_AS(p.purgatory.async_watch(listened, {2}, handler), std::logic_error);
  CHECK_FALSE(listened->was_watched());
  CHECK(io.poll() == 0);  // nothing posted, and no work kept: poll() returns at once
  CHECK(handlers == 0);

  CHECK(waited->force_complete());
  io.restart();
  io.run();
  CHECK(first == Outcome::completed);
  CHECK(handlers == 0);
  CHECK(waited->completions == 1);
}

TEST_CASE("0.1 names: CallableTask, CallablePeriodicTask and CallableOperation") {
  auto f = [] {};
  static_assert(std::is_base_of_v<TimerTask, CallableTask<decltype(f)>>);
  static_assert(std::is_base_of_v<PeriodicTask, CallablePeriodicTask<decltype(f)>>);
  auto c = [] { return true; };
  static_assert(
      std::is_base_of_v<DelayedOperation,
                        CallableOperation<decltype(c), decltype(f), NoExpirationCallback>>);
  OperationLock lock;
  lock.lock();
  CHECK(lock.held_by_current_thread());
  lock.unlock();
}

}  // namespace
}  // namespace purgatory::test
