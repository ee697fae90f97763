// Tests of purgatory/delayed_operation.hpp: every promise of DelayedOperation,
// detail::OutcomeListener and make_operation (docs/contracts.md). Its lock, force_complete() and
// safe_try_complete(): delayed_operation_lock_test.cpp; races: races/.
#include "purgatory/delayed_operation.hpp"

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "allocation_counter.hpp"
#include "contract_support.hpp"
#include "purgatory/detail/operation_access.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "delayed_operation.hpp: try_complete() may call force_complete() on this operation: it wins, "
    "and on_complete() runs after try_complete() returns, on the same thread") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  std::atomic<int> completions_inside{-1};
  bool forced = false;
  op->on_try = [&] {
    if (op->tries < 3) return false;  // the watch's two tries pass
    forced = op->force_complete();
    completions_inside = op->completions.load();
    return false;
  };
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1}));
  CHECK(p.purgatory.check_and_complete(1) == 1);
  CHECK(forced);
  CHECK(completions_inside == 0);
  CHECK(op->completions == 1);
  CHECK(op->complete_thread == std::this_thread::get_id());
  CHECK_FALSE(op->callback_with_lock.load());
}

TEST_CASE(
    "delayed_operation.hpp: try_complete() may call check_and_complete() on any purgatory: the "
    "check never blocks on an operation's lock another thread holds") {
  ManualPurgatory<int> p1(TimerOptions::Concurrency::thread_safe);
  ManualPurgatory<int> p2(TimerOptions::Concurrency::thread_safe);
  auto a = probe(1s);
  auto b = probe(1s);
  p1.purgatory.try_complete_else_watch(a, {1});
  p2.purgatory.try_complete_else_watch(b, {2});
  Signal holding;
  Signal checked;
  std::thread holder([&] {
    b->lock();
    holding.set();
    CHECK(checked.wait(5s));  // fails if the check below blocked on b's lock
    b->unlock();
  });
  REQUIRE(holding.wait());
  std::size_t inner = 99;
  a->on_try = [&] {
    inner = p2.purgatory.check_and_complete(2);
    return true;
  };
  b->completable = true;
  on_another_thread([&] {
    CHECK(p1.purgatory.check_and_complete(1) == 1);
    checked.set();
  });
  holder.join();
  CHECK(inner == 0);  // b's lock was busy: the check left a note instead of waiting
  CHECK(a->outcome() == Outcome::completed);
  CHECK(b->outcome() == Outcome::completed);  // the note was served when the holder unlocked
}

TEST_CASE(
    "delayed_operation.hpp: a check that reaches the operation from inside its own try_complete() "
    "makes it run once more after it returns, and only once") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  bool first_watch_done = false;
  op->on_try = [&] {
    (void)p.purgatory.check_and_complete(1);  // a key it watches
    return false;
  };
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1}));
  first_watch_done = true;
  const int before = op->tries;
  CHECK_FALSE(op->safe_try_complete());
  CHECK(op->tries - before == 2);  // its own run, and exactly one re-run
  const int before_check = op->tries;
  CHECK(p.purgatory.check_and_complete(1) == 0);
  CHECK(op->tries - before_check == 2);
  // The re-run is a real try: a condition that holds by then completes the operation.
  op->on_try = [&] {
    (void)p.purgatory.check_and_complete(1);
    return op->tries - before_check == 4;  // true on the re-run of this call
  };
  CHECK(p.purgatory.check_and_complete(1) == 1);
  CHECK(op->tries - before_check == 4);
  CHECK(op->completions == 1);
  CHECK(first_watch_done);
}

TEST_CASE(
    "delayed_operation.hpp: a check reaching the operation through another operation's "
    "try_complete() also re-runs it once, not forever") {
  ManualPurgatory<int> p;
  auto a = probe(1s);
  auto b = probe(1s);
  a->on_try = [&] {
    (void)p.purgatory.check_and_complete(2);
    return false;
  };
  b->on_try = [&] {
    (void)p.purgatory.check_and_complete(1);
    return false;
  };
  p.purgatory.try_complete_else_watch(a, {1});
  p.purgatory.try_complete_else_watch(b, {2});
  const int a_before = a->tries;
  const int b_before = b->tries;
  CHECK(a->safe_try_complete() == false);
  CHECK(a->tries - a_before == 2);
  CHECK(b->tries - b_before == 2);  // once per run of a
}

TEST_CASE(
    "delayed_operation.hpp: on_complete(), on_expiration() and the outcome listener run with no "
    "lock of the operation or the purgatory held: they may call check_and_complete(), "
    "try_complete_else_watch() of a new operation, cancel_for_key(), from any thread") {
  ManualPurgatory<int> p(TimerOptions::Concurrency::thread_safe);
  std::vector<ProbeRef> spawned;
  std::atomic<int> callbacks_ok{0};
  // What every callback does: call into the purgatory on this thread and from another thread
  // (which would block on any lock this thread held), and lock the operation from elsewhere.
  auto call_everything = [&](DelayedOperation& self) {
    CHECK_FALSE(self.lock_held_by_current_thread());
    auto fresh = probe(1s);
    CHECK_FALSE(p.purgatory.try_complete_else_watch(fresh, {1, 2}));
    spawned.push_back(fresh);
    (void)p.purgatory.check_and_complete(1);
    (void)p.purgatory.cancel_for_key(99);
    (void)p.purgatory.metrics();
    Signal other_done;
    std::thread other([&] {
      self.lock();  // free: not held by the callback's thread
      self.unlock();
      auto other_op = probe(1s);
      p.purgatory.try_complete_else_watch(other_op, {1});
      (void)p.purgatory.check_and_complete(1);
      CHECK(other_op->force_complete());
      other_done.set();
    });
    CHECK(other_done.wait(5s));
    other.join();
    callbacks_ok.fetch_add(1);
  };
  auto completed = probe(1s);
  completed->on_done = [&] { call_everything(*completed); };
  auto expired = probe(5ms);
  expired->on_expired = [&] { call_everything(*expired); };
  p.purgatory.try_complete_else_watch(completed, {1});
  p.purgatory.try_complete_else_watch(expired, {2});
  completed->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 1);
  p.advance(10ms);
  CHECK(expired->outcome() == Outcome::expired);

  class CallingListener final : public detail::OutcomeListener {
   public:
    explicit CallingListener(std::function<void()> f) : f_(std::move(f)) {}
    void on_outcome(Outcome) noexcept override { f_(); }

   private:
    std::function<void()> f_;
  };
  auto listened = probe(1s);
  detail::OperationAccess::listen(
      *listened, std::make_unique<CallingListener>([&] { call_everything(*listened); }));
  p.purgatory.try_complete_else_watch(listened, {3});
  CHECK(listened->force_complete());
  CHECK(callbacks_ok == 3);
  CHECK_FALSE(completed->callback_with_lock.load());
  CHECK_FALSE(expired->callback_with_lock.load());
  CHECK(spawned.size() == 3);
}

TEST_CASE(
    "delayed_operation.hpp: exceptions escaping a callback are caught and reported to the "
    "purgatory's error handler, an exception from try_complete() counts as not complete") {
  std::vector<std::string> reported;
  PurgatoryOptions options;
  options.on_callback_error = [&](const DelayedOperation&, std::exception_ptr e,
                                  std::string_view where) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      reported.push_back(std::string(where) + ": " + ex.what());
    }
  };
  ManualPurgatory<int> p(options);
  bool throw_in_try = true;
  auto op = make_operation(
      10ms,
      [&]() -> bool {
        if (throw_in_try) throw std::runtime_error("condition broke");
        return false;
      },
      [] { throw std::runtime_error("complete broke"); },
      [] { throw std::runtime_error("expiration broke"); });
  {
    contract::StderrCapture err;
    CHECK_NOTHROW(p.purgatory.try_complete_else_watch(op, {1}));
    // The first try comes before the watch: not watched yet, so it goes to stderr.
    CHECK(err.text().find("condition broke") != std::string::npos);
  }
  CHECK(op->outcome() == Outcome::pending);  // the throwing try is "not complete"
  CHECK(p.purgatory.watched() == 1);
  CHECK_NOTHROW(p.purgatory.check_and_complete(1));
  CHECK(op->outcome() == Outcome::pending);
  throw_in_try = false;
  CHECK_NOTHROW(p.advance(20ms));  // expires: on_complete and on_expiration both throw
  CHECK(op->outcome() == Outcome::expired);
  REQUIRE(reported.size() == 4);  // the watch's second try, one check, then the two callbacks
  CHECK(reported[0] == "try_complete: condition broke");
  CHECK(reported[1] == "try_complete: condition broke");
  CHECK(reported[2] == "on_complete: complete broke");
  CHECK(reported[3] == "on_expiration: expiration broke");
}

TEST_CASE(
    "delayed_operation.hpp: an exception from try_complete() is reported once the operation's "
    "lock is released, by the thread releasing it, with no lock held: the watch's try, another "
    "thread's check, and two tries under a lock the caller holds (reported in order at unlock)") {
  struct Report {
    std::thread::id thread;
    bool lock_held;
    std::string what;
  };
  std::mutex mu;
  std::vector<Report> reports;
  PurgatoryOptions options;
  options.on_callback_error = [&](const DelayedOperation& op, std::exception_ptr e,
                                  std::string_view where) {
    std::string what(where);
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what += std::string(": ") + ex.what();
    }
    const std::lock_guard<std::mutex> lock(mu);
    reports.push_back({std::this_thread::get_id(), op.lock_held_by_current_thread(), what});
  };
  ManualPurgatory<int> p(options);
  std::atomic<int> tries{0};
  std::atomic<bool> fail{false};
  auto op = make_operation(
      1s,
      [&]() -> bool {
        const int n = tries.fetch_add(1) + 1;
        // The watch's second try (the first, before the watch, goes to stderr: see above).
        if (n == 2 || fail.load()) throw std::runtime_error("broke on try " + std::to_string(n));
        return false;
      },
      [] {});
  const auto self = std::this_thread::get_id();
  CHECK_FALSE(p.purgatory.try_complete_else_watch(op, {1}));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].what == "try_complete: broke on try 2");
  CHECK(reports[0].thread == self);
  CHECK_FALSE(reports[0].lock_held);

  fail = true;
  std::thread::id checker_id;
  on_another_thread([&] {
    checker_id = std::this_thread::get_id();
    CHECK(p.purgatory.check_and_complete(1) == 0);
  });
  REQUIRE(reports.size() == 2);
  CHECK(reports[1].what == "try_complete: broke on try 3");
  CHECK(reports[1].thread == checker_id);
  CHECK_FALSE(reports[1].lock_held);

  op->lock();
  CHECK_FALSE(op->safe_try_complete());
  CHECK_FALSE(op->safe_try_complete());
  CHECK(reports.size() == 2);  // not while the caller holds the lock
  op->unlock();
  REQUIRE(reports.size() == 4);
  CHECK(reports[2].what == "try_complete: broke on try 4");
  CHECK(reports[3].what == "try_complete: broke on try 5");
  for (std::size_t i = 2; i < 4; ++i) {
    CHECK(reports[i].thread == self);
    CHECK_FALSE(reports[i].lock_held);
  }
  CHECK(op->outcome() == Outcome::pending);  // each throwing try counts as "not complete"
  CHECK(p.purgatory.watched() == 1);
}

TEST_CASE(
    "delayed_operation.hpp: exceptions from the callbacks of an operation no purgatory watches "
    "go to stderr, naming the callback") {
  auto op = make_operation(
      1s, [] { return true; }, [] { throw std::runtime_error("unwatched complete broke"); });
  contract::StderrCapture err;
  bool won = false;
  CHECK_NOTHROW(won = op->safe_try_complete());
  const std::string text = err.text();
  CHECK(won);
  CHECK(text.find("on_complete") != std::string::npos);
  CHECK(text.find("unwatched complete broke") != std::string::npos);
}

TEST_CASE(
    "delayed_operation.hpp: detail::OutcomeListener is told once, after the callbacks, "
    "set_outcome_listener() calls it at once if the callbacks already ran, a second listener "
    "throws std::logic_error, a null one std::invalid_argument") {
  std::atomic<int> calls{0};
  std::atomic<Outcome> seen{Outcome::pending};
  std::atomic<bool> early{false};
  ManualPurgatory<int> p;
  auto op = probe(10ms);
  detail::OperationAccess::listen(*op, std::make_unique<Listener>(calls, seen, op, early));
  CHECK_THROWS_AS(
      detail::OperationAccess::listen(*op, std::make_unique<Listener>(calls, seen, op, early)),
      std::logic_error);
  p.purgatory.try_complete_else_watch(op, {1});
  CHECK(calls == 0);
  p.advance(20ms);
  CHECK(calls == 1);
  CHECK(seen.load() == Outcome::expired);
  CHECK_FALSE(early.load());

  auto done = probe(1s);
  CHECK(done->force_complete());
  std::atomic<int> late_calls{0};
  detail::OperationAccess::listen(*done, std::make_unique<Listener>(late_calls, seen, done, early));
  CHECK(late_calls == 1);  // at once, on this thread
  CHECK(seen.load() == Outcome::completed);
  CHECK_THROWS_AS(detail::OperationAccess::listen(
                      *done, std::make_unique<Listener>(late_calls, seen, done, early)),
                  std::logic_error);
  CHECK(late_calls == 1);
  auto fresh = probe(1s);
  CHECK_THROWS_AS(detail::OperationAccess::listen(*fresh, nullptr), std::invalid_argument);
  std::atomic<int> fresh_calls{0};
  detail::OperationAccess::listen(*fresh,
                                  std::make_unique<Listener>(fresh_calls, seen, fresh, early));
  CHECK(fresh->force_complete());
  CHECK(fresh_calls == 1);  // the refused null listener did not take the place
}

TEST_CASE(
    "delayed_operation.hpp: cancel() withdraws a watched operation: Outcome::cancelled, "
    "on_complete() once with no lock held, off every key and out of the timer, counted") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  p.purgatory.try_complete_else_watch(op, {1, 2});
  REQUIRE(p.purgatory.watched() == 2);
  CHECK(op->cancel());
  CHECK(op->outcome() == Outcome::cancelled);
  CHECK(op->completions == 1);
  CHECK(op->seen_in_on_complete == Outcome::cancelled);
  CHECK_FALSE(op->callback_with_lock);
  CHECK(p.purgatory.watched() == 0);
  CHECK(p.purgatory.num_delayed() == 0);
  CHECK(p.manual.timer.size() == 0);
  CHECK(p.purgatory.metrics().cancelled_total == 1);
  // Exactly one outcome: nothing afterwards decides it again.
  CHECK_FALSE(op->cancel());
  CHECK_FALSE(op->force_complete());
  op->completable = true;
  CHECK(p.purgatory.check_and_complete(1) == 0);
  p.advance(2s);
  CHECK(op->outcome() == Outcome::cancelled);
  CHECK(op->completions == 1);
  CHECK(op->expirations == 0);
}

TEST_CASE("delayed_operation.hpp: cancel() of an operation decided already, or never watched") {
  ManualPurgatory<int> p;
  auto done = probe(1s);
  p.purgatory.try_complete_else_watch(done, {1});
  CHECK(done->force_complete());
  CHECK_FALSE(done->cancel());  // decided first: the outcome stays
  CHECK(done->outcome() == Outcome::completed);
  CHECK(done->completions == 1);

  auto lone = probe(1s);
  CHECK(lone->cancel());  // no purgatory needed
  CHECK(lone->outcome() == Outcome::cancelled);
  CHECK(lone->completions == 1);
  CHECK_FALSE(p.purgatory.try_complete_else_watch(lone, {1}));  // decided: not watched
  CHECK(p.purgatory.watched() == 0);
}

TEST_CASE(
    "delayed_operation.hpp: cancel() from inside the operation's own try_complete() decides it, "
    "on_complete() runs once the lock is released") {
  ManualPurgatory<int> p;
  auto op = probe(1s);
  DelayedOperation* raw = op.get();
  std::atomic<bool> cancelled_inside{false};
  std::atomic<int> completions_seen_inside{-1};
  op->on_try = [&] {
    if (raw->outcome() == Outcome::pending && p.purgatory.watched() > 0) {
      cancelled_inside = raw->cancel();
      completions_seen_inside = op->completions.load();
    }
    return false;
  };
  p.purgatory.try_complete_else_watch(op, {1});
  CHECK(p.purgatory.check_and_complete(1) == 0);
  CHECK(cancelled_inside);
  CHECK(completions_seen_inside == 0);  // deferred until the lock was released
  CHECK(op->completions == 1);
  CHECK(op->outcome() == Outcome::cancelled);
  CHECK(p.purgatory.watched() == 0);
}

}  // namespace
}  // namespace purgatory::test

namespace purgatory::test {
namespace {

struct RecordingListener final : detail::OutcomeListener {
  explicit RecordingListener(std::atomic<int>& calls, Outcome& seen) : calls_(calls), seen_(seen) {}
  void on_outcome(Outcome outcome) noexcept override {
    seen_ = outcome;
    calls_.fetch_add(1);
  }
  std::atomic<int>& calls_;
  Outcome& seen_;
};

TEST_CASE("force_complete: exactly one of 8 racing threads wins and on_complete runs once") {
  for (int round = 0; round < 50; ++round) {
    auto op = mock(1000ms);
    std::atomic<int> wins{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        while (!go.load())
          std::this_thread::yield();
        if (op->force_complete()) wins.fetch_add(1);
      });
    }
    go = true;
    for (auto& t : threads)
      t.join();
    CHECK(wins == 1);
    CHECK(op->completions == 1);
    CHECK(op->expirations == 0);
    CHECK(op->outcome() == Outcome::completed);
  }
}

TEST_CASE("make_operation: callables without a subclass - on_complete may take the Outcome") {
  bool ready = false;
  Outcome seen = Outcome::pending;
  int expirations = 0;
  auto op = make_operation(
      5ms, [&] { return ready; }, [&](Outcome o) { seen = o; }, [&] { ++expirations; });
  CHECK_FALSE(op->safe_try_complete());
  ready = true;
  CHECK(op->safe_try_complete());
  CHECK(seen == Outcome::completed);
  CHECK(expirations == 0);
  CHECK_FALSE(op->force_complete());
  CHECK_FALSE(op->safe_try_complete());

  int plain = 0;
  auto op2 = make_operation(
      5ms, [] { return false; }, [&] { ++plain; });
  CHECK(op2->force_complete());
  CHECK(plain == 1);
}

TEST_CASE("force_complete inside try_complete: on_complete runs after try_complete returns") {
  class Inner : public DelayedOperation {
   public:
    Inner() : DelayedOperation(1s) {}
    bool returned_before_complete = false;
    bool in_try = false;

   protected:
    bool try_complete() override {
      in_try = true;
      const bool won = force_complete();
      in_try = false;
      return won;
    }
    void on_complete() override { returned_before_complete = !in_try; }
  };
  purgatory::Ref<Inner> op(new Inner);
  CHECK(op->safe_try_complete());
  CHECK(op->returned_before_complete);
}

TEST_CASE("outcome listener: called once after the callbacks or at once if already done") {
  std::atomic<int> calls{0};
  Outcome seen = Outcome::pending;
  auto op = mock(1s);
  detail::OperationAccess::listen(*op, std::make_unique<RecordingListener>(calls, seen));
  CHECK(calls == 0);
  op->force_complete();
  CHECK(calls == 1);
  CHECK(seen == Outcome::completed);
  CHECK_THROWS_AS(
      detail::OperationAccess::listen(*op, std::make_unique<RecordingListener>(calls, seen)),
      std::logic_error);

  std::atomic<int> late_calls{0};
  Outcome late = Outcome::pending;
  auto done = mock(1s);
  done->force_complete();
  detail::OperationAccess::listen(*done, std::make_unique<RecordingListener>(late_calls, late));
  CHECK(late_calls == 1);
  CHECK(late == Outcome::completed);
}

TEST_CASE(
    "a throwing callback is reported and never propagated - try_complete throwing = not done") {
  auto op = make_operation(
      1s, []() -> bool { throw std::runtime_error("condition failed"); },
      [] { throw std::runtime_error("on_complete failed"); });
  CHECK_NOTHROW(CHECK_FALSE(op->safe_try_complete()));
  CHECK_NOTHROW(CHECK(op->force_complete()));
  CHECK(op->is_completed());
}

}  // namespace
}  // namespace purgatory::test
