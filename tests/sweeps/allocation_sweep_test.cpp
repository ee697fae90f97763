// The allocation sweep: every allocation the public surface makes, failed in turn.
//
// Each scenario drives one part of the surface on a manual clock, single-threaded (tasks run
// inline), and is run once per allocation it makes with that allocation failing (std::bad_alloc),
// then with every allocation from that one on failing (see sweep.hpp). After each run it checks
// what the headers promise out of memory: a call that throws has changed nothing (a refused add
// leaves the task as it was, a refused watch leaves the operation unwatched and undecided); every
// task and operation accepted ends with exactly one outcome, counted; size(), watched() and
// num_delayed() are back to 0 once everything ended. Under AddressSanitizer (where the task pool
// is off and every block comes from operator new) a leak or an invalid access fails the run too.
// The test prints how many allocations each scenario reached and failed.
#include "sweep.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif
#include <vector>

#include <doctest/doctest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)  // not with clang 14 (the TSan build)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif
#include "fault_injection.hpp"
#include "operation_timeout.hpp"

#include "manual_timer.hpp"
#include "purgatory/asio.hpp"
#include "purgatory/delayed_future.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/periodic_task.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "thread_slot.hpp"

using namespace std::chrono_literals;

namespace purgatory::sweep::allocations {
namespace {

// A task counting its runs.
struct Task : TimerTask {
  std::atomic<int> runs{0};

 protected:
  void run() override { runs.fetch_add(1); }
};

// One task and what became of its schedule.
struct Ledger {
  purgatory::Ref<Task> task;
  bool accepted = false;     // an add() of it returned
  bool cancelled = false;    // cancel() returned true
  bool handed_back = false;  // in the vector close() or drain() returned
};

TimerOptions manual_options(const ManualClock& clock, std::size_t bases) {
  return purgatory::test::driven_by_hand(clock, std::make_shared<InlineExecutor>(),
                                         {.name = "sweep", .bases = bases});
}

// Moves the clock and expires what is due; an expiry out of memory leaves the rest scheduled, so
// it is tried again (a few times: with every allocation failing it never succeeds).
void advance(ManualClock& clock, SystemTimer& timer, Nanos by) {
  clock.advance(by);
  ExternalDriver driver(timer);
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      (void)driver.advance_clock();
      return;
    } catch (const std::bad_alloc&) {
    }
  }
}

// add(), add_at(), reschedule() and cancel() of 8 tasks over 4 bases (some due at once, some on
// wheel levels never used before, one moved, one cancelled, one never due), a periodic task,
// expiry in 13 steps, then drain(0) or close(): every task ran once, was cancelled, or was handed
// back (in the vector, or dropped by a close() out of memory), or its add() threw and it is idle.
void timer_scenario(Verdict& v, bool end_with_drain) {
  ManualClock clock;
  std::optional<SystemTimer> timer;
  try {
    timer.emplace(manual_options(clock, 4));
  } catch (const std::bad_alloc&) {
    return;  // nothing was started
  }
  std::array<Ledger, 8> tasks;
  for (Ledger& l : tasks) {
    try {
      l.task = make_task<Task>();
    } catch (const std::bad_alloc&) {
    }
  }
  // Schedules task i from the base of `slot`: a refusal must leave it as it was.
  const auto schedule = [&](std::size_t i, std::uint32_t slot, auto&& how) {
    Ledger& l = tasks[i];
    if (!l.task) return;
    purgatory::detail::set_timer_thread_slot(slot);
    const bool was_pending = l.task->is_pending();
    try {
      how(l.task);
      l.accepted = true;
    } catch (const std::bad_alloc&) {
      v.expect(l.task->is_pending() == was_pending, "a refused add() changed the task");
      v.expect(l.task->runs.load() == 0, "a refused add() ran the task");
    }
  };
  schedule(0, 0, [&](auto& t) { timer->add(t, 0ms); });  // due at once: runs inside add()
  schedule(1, 1, [&](auto& t) { timer->add(t, 5ms); });
  schedule(2, 2, [&](auto& t) { timer->add(t, 2s); });  // two wheel levels never used before
  schedule(3, 3, [&](auto& t) { timer->add_at(t, clock.now() + 30ms); });
  schedule(4, 0, [&](auto& t) { timer->add(t, 10ms); });
  schedule(5, 1, [&](auto& t) { timer->add(t, 20ms); });
  schedule(6, 2, [&](auto& t) { timer->add(t, 1h); });  // never due: handed back at the end
  schedule(7, 3, [&](auto& t) { timer->add(t, 40ms); });
  if (tasks[4].accepted) {  // moved in place, to 50 ms
    try {
      v.expect(timer->reschedule(*tasks[4].task, 50ms), "reschedule() of a pending task: false");
    } catch (const std::bad_alloc&) {
      v.expect(tasks[4].task->is_pending(), "a refused reschedule() unscheduled the task");
    }
  }
  if (tasks[5].accepted) tasks[5].cancelled = tasks[5].task->cancel();
  if (tasks[7].accepted) {  // added again: moved to 45 ms, still one run
    schedule(7, 3, [&](auto& t) { timer->add(t, 45ms); });
  }
  // A task made of a lambda: its block comes from the task pool (the others use operator new).
  std::atomic<int> lambda_runs{0};
  TaskRef lambda_task;
  bool lambda_accepted = false;
  try {
    lambda_task = make_task([&lambda_runs] { lambda_runs.fetch_add(1); });
    purgatory::detail::set_timer_thread_slot(2);
    timer->add(lambda_task, 3ms);
    lambda_accepted = true;
  } catch (const std::bad_alloc&) {
    v.expect(!lambda_task || !lambda_task->is_pending(), "a refused add() left the task pending");
  }
  purgatory::Ref<PeriodicTask> beat;
  std::atomic<int> beats{0};
  try {
    beat = make_periodic([&beats] { beats.fetch_add(1); });
    purgatory::detail::set_timer_thread_slot(1);
    beat->start(*timer, 1ms, 3ms, PeriodicTask::Mode::fixed_rate);
  } catch (const std::bad_alloc&) {
    if (beat) v.expect(!beat->is_pending(), "a refused start() left the periodic task pending");
  }
  purgatory::detail::set_timer_thread_slot(0);
  for (int step = 0; step < 13; ++step)
    advance(clock, *timer, 5ms);

  std::array<bool, tasks.size()> pending_at_end{};
  for (std::size_t i = 0; i < tasks.size(); ++i)
    pending_at_end[i] = tasks[i].task && tasks[i].task->is_pending();
  const bool lambda_pending_at_end = lambda_task && lambda_task->is_pending();
  const std::vector<TaskRef> back = end_with_drain ? timer->drain(0ms) : timer->close();
  v.expect(timer->is_closed(), "not closed after close()/drain()");
  v.expect(timer->size() == 0, "size() is not 0 after close()/drain()");
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    Ledger& l = tasks[i];
    if (!l.task) continue;
    for (const TaskRef& t : back)
      l.handed_back = l.handed_back || t.get() == l.task.get();
    v.expect(!l.task->is_pending(), "a task is still pending after close()/drain()");
    const int outcomes = l.task->runs.load() + (l.cancelled ? 1 : 0) + (l.handed_back ? 1 : 0);
    if (!l.accepted) {
      v.expect(outcomes == 0, "a task whose add() threw has an outcome");
    } else if (outcomes == 0) {
      // Handed back by dropping the timer's reference (close() had no room): it was pending.
      v.expect(pending_at_end[i], "a task accepted has no outcome (lost)");
    } else {
      v.expect(outcomes == 1, "a task has more than one outcome");
    }
  }
  if (lambda_task) {
    v.expect(!lambda_task->is_pending(), "the lambda task is pending after close()/drain()");
    bool handed_back = false;
    for (const TaskRef& t : back)
      handed_back = handed_back || t == lambda_task;
    const int outcomes = lambda_runs.load() + (handed_back ? 1 : 0);
    if (!lambda_accepted) {
      v.expect(outcomes == 0, "the lambda task's add() threw, and it has an outcome");
    } else if (outcomes == 0) {
      v.expect(lambda_pending_at_end, "the lambda task was accepted and has no outcome (lost)");
    } else {
      v.expect(outcomes == 1, "the lambda task has more than one outcome");
    }
  }
  if (beat) {
    v.expect(!beat->is_pending(), "the periodic task is pending after close()/drain()");
    v.expect(beats.load() <= 22, "the periodic task ran more often than its schedule allows");
  }
}

// An operation counting its callbacks; completable when told.
class Op final : public DelayedOperation {
 public:
  explicit Op(Nanos timeout) : DelayedOperation(timeout) {}
  std::atomic<bool> completable{false};
  std::atomic<int> completions{0};
  std::atomic<int> expirations{0};

 protected:
  bool try_complete() override { return completable.load() && force_complete(); }
  void on_complete() override { completions.fetch_add(1); }
  void on_expiration() override { expirations.fetch_add(1); }
};

struct OpLedger {
  purgatory::Ref<Op> op;
  bool accepted = false;     // try_complete_else_watch() returned
  bool handed_back = false;  // by cancel_for_key(): its owner (the scenario) completes it
  bool forced = false;       // force_complete() returned true (watched or not)
};

PurgatoryOptions purgatory_options(const ManualClock& clock, std::atomic<int>& errors) {
  PurgatoryOptions o;
  o.name = "sweep";
  o.shards = 4;
  o.timer = manual_options(clock, 2);
  o.on_callback_error = [&errors](const DelayedOperation&, std::exception_ptr, std::string_view) {
    errors.fetch_add(1);
  };
  return o;
}

// Watches ops[i] on `keys`; a refused watch must leave nothing behind (then it is retried once:
// the caller still owns the operation).
template <class Purgatory>
void watch(Verdict& v, Purgatory& p, OpLedger& l, std::initializer_list<int> keys) {
  if (!l.op) return;
  for (int attempt = 0; attempt < 2 && !l.accepted; ++attempt) {
    try {
      (void)p.try_complete_else_watch(l.op, keys);
      l.accepted = true;
    } catch (const std::bad_alloc&) {
      v.expect(!l.op->was_watched(), "a refused watch: was_watched() is true");
      v.expect(l.op->outcome() == Outcome::pending, "a refused watch decided an outcome");
      v.expect(l.op->completions.load() == 0, "a refused watch ran on_complete()");
      v.expect(!testing::timeout_pending(*l.op), "a refused watch left its timeout scheduled");
    }
  }
}

// Every surface call of a purgatory with its own timer, 4 shards and 7 operations on 11 keys: one
// completed by its first try, one by check_and_complete(), one watched on 6 keys (more than are
// held inline) and force-completed, one expired, one handed back by cancel_for_key() (its owner
// then completes it), two shut down; metrics() and snapshot() on the way.
void purgatory_scenario(Verdict& v) {
  v.at("constructing");
  ManualClock clock;
  std::atomic<int> errors{0};
  std::optional<DelayedOperationPurgatory<int>> p;
  try {
    p.emplace(purgatory_options(clock, errors));
  } catch (const std::bad_alloc&) {
    return;
  }
  std::array<OpLedger, 7> ops;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    try {
      ops[i].op = purgatory::make_operation<Op>(i == 4 ? 10ms : 1h);
    } catch (const std::bad_alloc&) {
    }
  }
  v.at("watching");
  if (ops[0].op) ops[0].op->completable = true;
  watch(v, *p, ops[0], {1});  // completes on its first try: never watched
  watch(v, *p, ops[1], {1, 2, 3});
  watch(v, *p, ops[2], {2});
  watch(v, *p, ops[3], {1, 2, 3, 4, 5, 6});
  watch(v, *p, ops[4], {7});
  watch(v, *p, ops[5], {8, 9});
  watch(v, *p, ops[6], {1, 10});
  v.at("check_and_complete()");
  if (ops[1].op) ops[1].op->completable = true;
  try {
    (void)p->check_and_complete(2);
  } catch (const std::bad_alloc&) {
  }
  // Documented not to throw out of memory from here on, except where caught below.
  const auto must_not_throw = [&v](const char* call, auto&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      const Unarmed unarmed;
      v.fail(std::string(call) + " threw " + e.what());
    }
  };
  must_not_throw("force_complete()", [&] {
    if (ops[3].op) ops[3].forced = ops[3].op->force_complete();
  });
  v.at("cancel_for_key()");
  std::vector<OperationRef> handed_back;
  try {
    handed_back = p->cancel_for_key(8);
  } catch (const std::bad_alloc&) {
  }
  for (const OperationRef& back : handed_back) {
    for (OpLedger& l : ops)
      l.handed_back = l.handed_back || back.get() == l.op.get();
    must_not_throw("force_complete() of an operation cancel_for_key() returned",
                   [&] { (void)back->force_complete(); });  // the owner decides
  }
  v.at("expiring");
  clock.advance(15ms);
  ExternalDriver driver(p->timer());
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      (void)driver.advance_clock();
      break;
    } catch (const std::bad_alloc&) {
    }
  }
  v.at("metrics() and snapshot()");
  try {
    (void)p->metrics();
    (void)p->snapshot();
  } catch (const std::bad_alloc&) {
  }
  v.at("shutdown()");
  must_not_throw("shutdown()", [&] { p->shutdown(); });
  v.at("checking the outcomes");
  v.expect(p->watched() == 0, "watched() is not 0 after shutdown()");
  v.expect(p->num_delayed() == 0, "num_delayed() is not 0 after shutdown()");
  v.expect(p->timer().size() == 0, "the purgatory's timer still holds tasks after shutdown()");
  for (OpLedger& l : ops) {
    if (!l.op) continue;
    if (!l.accepted) {
      v.expect(l.op->completions.load() == (l.forced ? 1 : 0),
               "an operation whose watch threw completed (not forced by its owner)");
      continue;
    }
    v.expect(l.op->completions.load() == 1, "an operation accepted did not complete exactly once");
    v.expect(l.op->outcome() != Outcome::pending, "an operation accepted has no outcome");
    v.expect(l.op->expirations.load() == (l.op->outcome() == Outcome::expired ? 1 : 0),
             "on_expiration() ran although the operation did not expire, or twice");
    v.expect(!testing::timeout_pending(*l.op), "an operation's timeout is still scheduled");
  }
  v.expect(errors.load() == 0, "a callback's error was reported, but none threw");
}

// Runs the handlers ready on `io`; an exception from Asio's own machinery out of memory is
// Asio's (poll() may be called again), so it is retried a few times.
void poll(boost::asio::io_context& io) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      (void)io.poll();
      return;
    } catch (const std::bad_alloc&) {
    }
  }
}

// One async_watch() and what its handler got.
struct OutcomeWaitLedger {
  purgatory::Ref<Op> op;
  bool initiated = false;  // the initiating call returned (for a coroutine: it started)
  int handler_calls = 0;   // for a coroutine: the co_await finished (value or exception)
  bool aborted = false;    // operation_aborted (the cancellation)
  Outcome got = Outcome::pending;
};

// async_watch() with each kind of token: a handler bound to an io_context, use_future,
// use_awaitable, redirect_error(use_awaitable, ec), and a handler with a cancellation slot that is
// then emitted. The operations are then completed by checks and the purgatory shut down: every
// wait accepted completes exactly once with its operation's outcome; a refused one never, and its
// operation is not watched.
void async_scenario(Verdict& v) {
  v.at("constructing");
  ManualClock clock;
  std::atomic<int> errors{0};
  std::optional<DelayedOperationPurgatory<int>> p;
  std::optional<boost::asio::io_context> io;
  std::optional<boost::asio::cancellation_signal> cancel;
  try {
    p.emplace(purgatory_options(clock, errors));
    io.emplace(1);
    cancel.emplace();
  } catch (const std::bad_alloc&) {
    return;
  }
  std::array<OutcomeWaitLedger, 5> waits;
  for (OutcomeWaitLedger& w : waits) {
    try {
      w.op = purgatory::make_operation<Op>(1h);
    } catch (const std::bad_alloc&) {
    }
  }
  const auto record = [](OutcomeWaitLedger& w) {
    return [&w](boost::system::error_code ec, Outcome o) {
      ++w.handler_calls;
      w.aborted = ec == boost::asio::error::operation_aborted;
      w.got = o;
    };
  };
  v.at("initiating the waits");
  std::future<Outcome> future;
  if (waits[0].op) {
    try {
      p->async_watch(waits[0].op, {0}, boost::asio::bind_executor(*io, record(waits[0])));
      waits[0].initiated = true;
    } catch (const std::bad_alloc&) {
    }
  }
  // Not with every allocation failing: libstdc++'s ~promise() allocates the broken_promise error
  // of a promise never set, so destroying the handler of a refused use_future wait then calls
  // std::terminate(), whoever destroys it. The transient runs fail each allocation here.
  if (waits[1].op && !persistent_run()) {
    try {
      future = p->async_watch(waits[1].op, {1}, boost::asio::use_future);
      waits[1].initiated = true;
    } catch (const std::bad_alloc&) {
    }
  }
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
  for (std::size_t i : {2, 3}) {
    OutcomeWaitLedger& w = waits[i];
    if (!w.op) continue;
    try {
      // Not failed: co_spawn() posts its coroutine's start where out of memory is
      // std::terminate() whatever the library does. The coroutine's wait, ours, starts in the
      // poll() below, failed like everything else.
      const Unarmed asio_own;
      boost::asio::co_spawn(
          *io,
          [&w, &p, redirect = i == 3, key = static_cast<int>(i)]() -> boost::asio::awaitable<void> {
            w.initiated = true;  // the coroutine started (Asio may fail to allocate its frame)
            try {
              if (redirect) {
                boost::system::error_code ec;
                w.got = co_await p->async_watch(
                    w.op, key, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
                w.aborted = ec == boost::asio::error::operation_aborted;
              } else {
                w.got = co_await p->async_watch(w.op, key, boost::asio::use_awaitable);
              }
            } catch (const std::bad_alloc&) {
              w.got = Outcome::pending;  // the wait itself could not start: no outcome
            }
            ++w.handler_calls;
          },
          boost::asio::detached);
    } catch (const std::bad_alloc&) {
    }
  }
#endif
  if (waits[4].op) {
    try {
      p->async_watch(waits[4].op, {4},
                     boost::asio::bind_cancellation_slot(
                         cancel->slot(), boost::asio::bind_executor(*io, record(waits[4]))));
      waits[4].initiated = true;
    } catch (const std::bad_alloc&) {
    }
  }
  poll(*io);  // the coroutines start, and initiate their waits
  v.at("completing the operations");
  cancel->emit(boost::asio::cancellation_type::terminal);  // cancels operation 4
  for (std::size_t i = 0; i < 4; ++i) {
    if (!waits[i].op) continue;
    waits[i].op->completable = true;
    try {
      (void)p->check_and_complete(static_cast<int>(i));
    } catch (const std::bad_alloc&) {
    }
  }
  v.at("shutdown()");
  p->shutdown();
  poll(*io);
  v.at("checking the handlers");
  if (waits[1].initiated) {
    const bool ready = future.wait_for(20s) == std::future_status::ready;
    v.expect(ready, "the use_future wait never completed");
    if (ready) {
      try {
        waits[1].got = future.get();
        waits[1].handler_calls = 1;
      } catch (const std::future_error& e) {
        // Asio's use_future allocates when the value is set (its own executor, not through the
        // memory set aside): out of memory there the handler is destroyed, and the future says so.
        v.expect(e.code() == std::future_errc::broken_promise, "use_future: another future_error");
        waits[1].handler_calls = 1;
        waits[1].aborted = true;
      } catch (const std::exception&) {
        v.fail("the use_future wait completed with an exception");
      }
    }
  }
  for (std::size_t i = 0; i < waits.size(); ++i) {
    const OutcomeWaitLedger& w = waits[i];
    if (!w.initiated) {
      v.expect(w.handler_calls == 0, "a refused wait called its handler");
      v.expect(!w.op || !w.op->was_watched(), "a refused wait left its operation watched");
      continue;
    }
    if (w.handler_calls != 1) {
      const Unarmed unarmed;
      v.fail("wait " + std::to_string(i) + " was accepted, and its handler ran " +
             std::to_string(w.handler_calls) + " times");
    }
    if (w.handler_calls == 1 && (i == 2 || i == 3) && w.got == Outcome::pending && !w.aborted) {
      continue;  // the coroutine's co_await could not start its wait: it threw, once
    }
    if (i == 1 && w.aborted) continue;  // broken_promise, above
    if (w.handler_calls == 1) {
      v.expect(w.got == w.op->outcome(), "a wait got another outcome than its operation");
      v.expect(w.aborted == (w.got == Outcome::cancelled), "operation_aborted without cancelled");
    }
    if (i == 4 && w.handler_calls == 1) {
      v.expect(w.got == Outcome::cancelled, "the cancelled wait got another outcome");
    }
  }
  v.expect(p->watched() == 0, "watched() is not 0 after shutdown()");
}

// DelayedFuturePurgatory: one DelayedFuture completed by its two promises, one expired, then
// shut down. A try_complete_else_watch() that throws leaves nothing: its callback never runs.
void delayed_future_scenario(Verdict& v) {
  v.at("constructing");
  ManualClock clock;
  std::atomic<int> errors{0};
  std::shared_ptr<SystemTimer> timer;  // shared: the test drives its expiry
  std::optional<DelayedFuturePurgatory<int>> d;
  std::array<std::optional<Promise<int>>, 3> promises;
  try {
    timer = std::make_shared<SystemTimer>(manual_options(clock, 2));
    PurgatoryOptions o = purgatory_options(clock, errors);
    o.name = "delayed-future";
    d.emplace(timer, std::move(o));
    for (auto& promise : promises)
      promise.emplace();
  } catch (const std::bad_alloc&) {
    return;
  }
  struct Call {
    bool returned = false;
    purgatory::Ref<DelayedFuture<int>> op;
    int callbacks = 0;
    Outcome got = Outcome::pending;
  };
  std::array<Call, 2> calls;
  const auto watch = [&](Call& c, Nanos timeout, std::initializer_list<std::size_t> which) {
    try {
      std::vector<SharedFuture<int>> futures;
      for (std::size_t i : which)
        futures.push_back(promises[i]->get_future());
      c.op = d->try_complete_else_watch(timeout, std::move(futures),
                                        [&c](const std::vector<SharedFuture<int>>&, Outcome o) {
                                          ++c.callbacks;
                                          c.got = o;
                                        });
      c.returned = true;
    } catch (const std::bad_alloc&) {
    }
  };
  v.at("watching");
  watch(calls[0], 100ms, {0, 1});
  watch(calls[1], 10ms, {2});
  v.at("completing the promises");
  for (std::size_t i : {0, 1}) {
    try {
      promises[i]->set_value(static_cast<int>(i));
    } catch (const std::bad_alloc&) {
      v.fail("Promise::set_value() threw std::bad_alloc");
    }
  }
  v.at("expiring");
  advance(clock, *timer, 20ms);
  v.at("shutdown()");
  d->shutdown();
  (void)timer->close();
  v.at("checking the callbacks");
  for (const Call& c : calls) {
    if (!c.returned) {
      v.expect(c.callbacks == 0, "a try_complete_else_watch() that threw ran its callback");
      continue;
    }
    v.expect(c.callbacks == 1, "a DelayedFuture accepted did not call back exactly once");
    v.expect(c.got == c.op->outcome(), "the callback got another outcome than its operation");
  }
  if (calls[0].returned && calls[0].callbacks == 1) {
    v.expect(calls[0].got == Outcome::completed, "both futures done: not completed");
  }
  v.expect(d->num_delayed() == 0, "num_delayed() is not 0 after shutdown()");
}

TEST_CASE(
    "allocation sweep: each allocation of the timer, purgatory, async and DelayedFuture "
    "scenarios fails in turn: calls that throw changed nothing, every task and operation has "
    "exactly one outcome, the counters return to 0") {
  if (!operator_new_failed()) {
    MESSAGE("ThreadSanitizer: operator new cannot be replaced; only the task pool's refill fails");
  }
  std::vector<Report> reports;
  reports.push_back(run_sweep("timer: add/cancel/reschedule/expire, close()",
                              [](Verdict& v) { timer_scenario(v, false); }));
  reports.push_back(run_sweep("timer: add/cancel/reschedule/expire, drain()",
                              [](Verdict& v) { timer_scenario(v, true); }));
  reports.push_back(run_sweep("purgatory: watch/check/force/expire/cancel_for_key/shutdown",
                              &purgatory_scenario));
  reports.push_back(
      run_sweep("async_watch: handler, use_future, use_awaitable, "
                "redirect_error, a cancellation slot",
                &async_scenario));
  reports.push_back(
      run_sweep("DelayedFuture: completed, expired, shut down", &delayed_future_scenario));
  std::uint64_t clean = 0;
  std::uint64_t failed = 0;
  for (const Report& r : reports) {
    INFO(r.name);
    CHECK(r.clean_allocations > 0);
    CHECK(r.transient_runs == r.clean_allocations);  // each allocation reached failed once
    std::string problems;
    for (const std::string& p : r.problems)
      problems += "\n  " + p;
    INFO("first problems:" << problems);
    CHECK(r.problem_count == 0);
    clean += r.clean_allocations;
    failed += r.transient_runs + r.persistent_failed;
  }
  std::printf(
      "allocation sweep: total: %llu allocations in %zu scenarios, %llu failures injected\n",
      static_cast<unsigned long long>(clean), reports.size(),
      static_cast<unsigned long long>(failed));
}

}  // namespace
}  // namespace purgatory::sweep::allocations
