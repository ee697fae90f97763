// The callback sweep: every piece of user code the library calls throws in turn.
//
// The user-code points: a task's run(), an executor's execute(), the wakeup hook, an operation's
// try_complete(), on_complete() and on_expiration(), and the key's Hash, KeyEqual and copy
// constructor. Each scenario is run once per call of user code it makes, with that call throwing
// (std::runtime_error), until a run makes fewer calls. After each run it checks what the headers
// say of an exception there: run() and execute(): reported to on_task_error, the timer goes on,
// and the task still runs exactly once; the wakeup hook: printed, the add stands; try_complete():
// counts as "not complete", reported once the lock is released; on_complete() and
// on_expiration(): reported, the outcome stands, on_expiration() still runs after a throwing
// on_complete(); Hash, KeyEqual, the key's copy: the watch is refused (nothing behind), and
// check_and_complete(), cancel_for_key() and snapshot() throw having changed nothing. Nothing is
// lost or doubled: every task and operation accepted has exactly one outcome, every exception
// thrown is reported exactly once (counted).
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "../purgatory/purgatory_contract_support.hpp"
#include "manual_timer.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "sweep.hpp"
#include "thread_slot.hpp"

using namespace std::chrono_literals;

namespace purgatory::sweep::callbacks {
namespace {

// The exception user code throws here.
struct Injected : std::runtime_error {
  explicit Injected(const char* where) : std::runtime_error(where) {}
};

// Lines of `text` containing `what`.
int lines_with(const std::string& text, std::string_view what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// Counts the calls of user code and makes the k-th throw. Single-threaded: every scenario runs
// its callbacks inline on the test's thread.
struct Callbacks {
  std::uint64_t throw_at = 0;  // 0: none
  std::uint64_t calls = 0;
  std::uint64_t thrown = 0;
  std::array<std::uint64_t, 9> thrown_at{};  // per point, indexed by Point
};
Callbacks g_callbacks;

enum Point : std::size_t {
  kRun,
  kExecute,
  kWakeupHook,
  kTryComplete,
  kOnComplete,
  kOnExpiration,
  kHash,
  kKeyEqual,
  kKeyCopy
};
constexpr std::array<const char*, 9> kPointNames = {
    "run()",          "execute()",     "wakeup hook",
    "try_complete()", "on_complete()", "on_expiration()",
    "Hash",           "KeyEqual",      "the key's copy constructor"};

// Called at the start of each piece of user code.
void user_code(Point point) {
  Callbacks& c = g_callbacks;
  if (++c.calls != c.throw_at) return;
  ++c.thrown;
  ++c.thrown_at[point];
  throw Injected(kPointNames[point]);
}

struct Report {
  std::uint64_t clean_calls = 0;
  std::uint64_t runs = 0;
  std::array<std::uint64_t, 9> thrown_at{};
  std::uint64_t problem_count = 0;
  std::vector<std::string> problems;
};

template <class Scenario>
Report callback_sweep(const char* name, Scenario scenario) {
  Report report;
  const auto run = [&](std::uint64_t k) {
    g_callbacks = Callbacks{k, 0, 0, {}};
    Verdict verdict;
    try {
      scenario(verdict);
    } catch (const std::exception& e) {
      verdict.fail(std::string("an exception escaped the scenario: ") + e.what());
    }
    report.problem_count += verdict.count();
    for (const std::string& p : verdict.problems()) {
      if (report.problems.size() < 12) {
        report.problems.push_back("run k = " + std::to_string(k) + ": " + p);
      }
    }
    return g_callbacks;
  };
  report.clean_calls = run(0).calls;
  for (std::uint64_t k = 1;; ++k) {
    const Callbacks c = run(k);
    if (c.thrown == 0) break;
    ++report.runs;
    for (std::size_t i = 0; i < c.thrown_at.size(); ++i)
      report.thrown_at[i] += c.thrown_at[i];
  }
  std::string per_point;
  for (std::size_t i = 0; i < kPointNames.size(); ++i) {
    if (report.thrown_at[i] == 0) continue;
    per_point += std::string(per_point.empty() ? "" : ", ") + kPointNames[i] + " " +
                 std::to_string(report.thrown_at[i]);
  }
  std::printf("callback sweep: %-36s %3llu calls of user code, each threw once: %s\n", name,
              static_cast<unsigned long long>(report.clean_calls), per_point.c_str());
  std::fflush(stdout);
  return report;
}

// ---- the timer ---------------------------------------------------------------------------------

struct Task : TimerTask {
  int runs = 0;

 protected:
  void run() override {
    ++runs;  // the run happened, whether it throws or not
    user_code(kRun);
  }
};

// Runs each batch on the calling thread, after user code that may throw before taking it.
struct ThrowingExecutor final : Executor {
  void execute(ExpiredBatch& batch) override {
    user_code(kExecute);
    batch.run_all();
  }
};

// 6 tasks over 2 bases on an executor and a wakeup hook that throw in turn, expiry in 4 steps,
// close(): every task accepted ran once, was cancelled, or was handed back; every exception from
// run() or execute() reached on_task_error once.
void timer_scenario(Verdict& v) {
  contract::StderrCapture printed;
  ManualClock clock;
  int reported = 0;
  TimerOptions o = purgatory::test::driven_by_hand(clock, std::make_shared<ThrowingExecutor>(),
                                                   {.name = "callbacks", .bases = 2});
  o.on_task_error = [&reported](const TimerTask&, std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const Injected&) {
      ++reported;
    } catch (...) {
    }
  };
  SystemTimer timer(std::move(o));
  ExternalDriver driver(timer, [] { user_code(kWakeupHook); });
  (void)driver.arm();  // nothing pending: every add wakes the driver (calls the hook)
  std::array<purgatory::Ref<Task>, 6> tasks;
  std::array<bool, 6> accepted{};
  const std::array<Nanos, 6> delays = {0ms, 5ms, 10ms, 15ms, 1h, 12ms};
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    tasks[i] = make_task<Task>();
    purgatory::detail::set_timer_thread_slot(static_cast<std::uint32_t>(i));
    try {
      timer.add(tasks[i], delays[i]);
      accepted[i] = true;
    } catch (const std::exception& e) {
      v.fail(std::string("add() threw ") + e.what());
      v.expect(!tasks[i]->is_pending(), "a refused add() left the task pending");
    }
  }
  purgatory::detail::set_timer_thread_slot(0);
  const bool cancelled = tasks[5]->cancel();
  for (int step = 0; step < 4; ++step) {
    clock.advance(5ms);
    try {
      (void)driver.advance_clock();
      (void)driver.arm();
    } catch (const std::exception& e) {
      v.fail(std::string("advance_clock() or arm() threw ") + e.what());
    }
  }
  std::vector<TaskRef> back;
  try {
    back = timer.close();
  } catch (const std::exception& e) {
    v.fail(std::string("close() threw ") + e.what());
  }
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    bool handed_back = false;
    for (const TaskRef& t : back)
      handed_back = handed_back || t.get() == tasks[i].get();
    const int outcomes = tasks[i]->runs + (i == 5 && cancelled ? 1 : 0) + (handed_back ? 1 : 0);
    v.expect(!tasks[i]->is_pending(), "a task is pending after close()");
    v.expect(outcomes == (accepted[i] ? 1 : 0), "a task has not exactly one outcome");
  }
  const auto thrown_by = [](Point point) { return static_cast<int>(g_callbacks.thrown_at[point]); };
  v.expect(reported == thrown_by(kRun) + thrown_by(kExecute),
           "on_task_error did not receive each exception from run() and execute() once");
  v.expect(lines_with(printed.text(), "the driver's wakeup threw") == thrown_by(kWakeupHook),
           "stderr did not get each exception from the wakeup hook once");
}

// ---- the purgatory -----------------------------------------------------------------------------

// A key whose copy, Hash and KeyEqual are user code.
struct Key {
  int value = 0;
  explicit Key(int v) : value(v) {}
  Key(const Key& other) : value(other.value) { user_code(kKeyCopy); }
  Key& operator=(const Key&) = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    user_code(kHash);
    return std::hash<int>{}(k.value);
  }
};
struct KeyEq {
  bool operator()(const Key& a, const Key& b) const {
    user_code(kKeyEqual);
    return a.value == b.value;
  }
};

class Op final : public DelayedOperation {
 public:
  explicit Op(Nanos timeout) : DelayedOperation(timeout) {}
  bool completable = false;
  int completions = 0;
  int expirations = 0;

 protected:
  bool try_complete() override {
    user_code(kTryComplete);
    return completable && force_complete();
  }
  void on_complete() override {
    ++completions;  // ran, whether it throws or not
    user_code(kOnComplete);
  }
  void on_expiration() override {
    ++expirations;
    user_code(kOnExpiration);
  }
};

// 6 operations on keys 1-8 of a purgatory with its own timer: one completed by its first try, one
// by check_and_complete(), one force-completed, one expired, one handed back by cancel_for_key()
// (its owner completes it), one shut down; a snapshot on the way.
void purgatory_scenario(Verdict& v) {
  contract::StderrCapture printed;  // what an operation no purgatory watches (yet) throws
  ManualClock clock;
  int reported = 0;
  PurgatoryOptions o;
  o.name = "callbacks";
  o.shards = 2;
  o.timer =
      purgatory::test::driven_by_hand(clock, std::make_shared<InlineExecutor>(), {.bases = 1});
  o.on_callback_error = [&reported](const DelayedOperation&, std::exception_ptr error,
                                    std::string_view) {
    try {
      std::rethrow_exception(error);
    } catch (const Injected&) {
      ++reported;
    } catch (...) {
    }
  };
  DelayedOperationPurgatory<Key, KeyHash, KeyEq> p(std::move(o));
  struct Ledger {
    purgatory::Ref<Op> op;
    bool accepted = false;
    bool forced = false;
  };
  std::array<Ledger, 6> ops;
  for (std::size_t i = 0; i < ops.size(); ++i)
    ops[i].op = purgatory::make_operation<Op>(i == 3 ? 10ms : 1h);
  ops[0].op->completable = true;
  const auto watch = [&](Ledger& l, std::initializer_list<int> values) {
    for (int attempt = 0; attempt < 2 && !l.accepted; ++attempt) {
      try {
        std::vector<Key> keys;
        keys.reserve(values.size());
        for (int value : values)
          keys.emplace_back(value);  // constructed, not copied: the copies below are the library's
        (void)p.try_complete_else_watch(l.op, std::span<const Key>(keys));
        l.accepted = true;
      } catch (const Injected&) {
        v.expect(!l.op->was_watched(), "a refused watch: was_watched() is true");
        v.expect(l.op->outcome() == Outcome::pending, "a refused watch decided an outcome");
        v.expect(!testing::timeout_pending(*l.op), "a refused watch left its timeout scheduled");
        v.expect(l.op->completions == 0, "a refused watch ran on_complete()");
      }
    }
  };
  watch(ops[0], {1});
  watch(ops[1], {1, 2});
  watch(ops[2], {2, 3});
  watch(ops[3], {4});
  watch(ops[4], {5, 6});
  watch(ops[5], {7, 8});
  const std::size_t watched_before = p.watched();
  ops[1].op->completable = true;
  try {
    (void)p.check_and_complete(Key(2));
  } catch (const Injected&) {
    v.expect(p.watched() == watched_before || ops[1].op->is_completed(),
             "a check_and_complete() that threw changed something");
  }
  ops[2].forced = ops[2].op->force_complete();
  try {
    for (const OperationRef& back : p.cancel_for_key(Key(5))) {
      v.expect(back.get() == ops[4].op.get(), "cancel_for_key() handed back another operation");
      ops[4].forced = back->force_complete();  // its owner decides
    }
  } catch (const Injected&) {
    v.expect(ops[4].op->outcome() == Outcome::pending, "a cancel_for_key() that threw decided");
  }
  try {
    (void)p.snapshot();
  } catch (const Injected&) {
  }
  clock.advance(15ms);
  (void)ExternalDriver(p.timer()).advance_clock();
  p.shutdown();
  v.expect(p.watched() == 0, "watched() is not 0 after shutdown()");
  v.expect(p.num_delayed() == 0, "num_delayed() is not 0 after shutdown()");
  for (const Ledger& l : ops) {
    const int expected = l.accepted || l.forced ? 1 : 0;
    v.expect(l.op->completions == expected, "an operation did not complete exactly once");
    v.expect(l.op->expirations == (l.op->outcome() == Outcome::expired ? 1 : 0),
             "on_expiration() ran although the operation did not expire, or twice");
  }
  const auto thrown_by = [](Point point) { return static_cast<int>(g_callbacks.thrown_at[point]); };
  // Reported to the purgatory's handler while watched, else to stderr (the watch's first try,
  // and the callbacks of an operation its owner completed itself).
  const int to_stderr = lines_with(printed.text(), "DelayedOperation::");
  v.expect(reported + to_stderr ==
               thrown_by(kTryComplete) + thrown_by(kOnComplete) + thrown_by(kOnExpiration),
           "the callbacks' exceptions were not each reported once");
}

TEST_CASE(
    "callback sweep: each call of user code (run, execute, wakeup hook, try_complete, "
    "on_complete, on_expiration, Hash, KeyEqual, the key's copy) throws in turn: each gets the "
    "behaviour its header states, nothing is lost or doubled") {
  std::vector<std::pair<const char*, Report>> reports;
  reports.emplace_back("timer",
                       callback_sweep("timer: run, execute, wakeup hook", &timer_scenario));
  reports.emplace_back(
      "purgatory", callback_sweep("purgatory: operation and key callbacks", &purgatory_scenario));
  std::array<std::uint64_t, 9> thrown{};
  for (const auto& named : reports) {
    const Report& r = named.second;
    INFO(named.first);
    CHECK(r.clean_calls > 0);
    CHECK(r.runs == r.clean_calls);  // each call of the clean run threw once
    std::string problems;
    for (const std::string& p : r.problems)
      problems += "\n  " + p;
    INFO("first problems:" << problems);
    CHECK(r.problem_count == 0);
    for (std::size_t i = 0; i < thrown.size(); ++i)
      thrown[i] += r.thrown_at[i];
  }
  for (std::size_t i = 0; i < thrown.size(); ++i) {
    INFO(kPointNames[i]);
    CHECK(thrown[i] > 0);  // every user-code point was reached, and threw
  }
}

}  // namespace
}  // namespace purgatory::sweep::callbacks
