// fuzz_timer_purgatory_model: a SystemTimer (ManualClock, external driver, InlineExecutor) and a
// DelayedOperationPurgatory sharing it, driven by a byte script and checked against a reference
// model after every step.
//
// Script: 4 header bytes (tick 1..5 ms, wheel size 2..64, start time, shards and max_pending),
// then operations until the input ends (script_format.md documents the encoding). Time moves in
// units of 250 us, so deadlines fall between ticks as well as on them.
//
// Invariants (abort() with a message on the first broken one; libFuzzer saves the input):
//   tasks: a run happens only while the model has the task pending, at clock >= its deadline and
//     >= its deadline rounded up to the tick; after the timer is driven at `now`, every pending
//     task whose rounded-up deadline is <= now has run (so within one tick of its deadline); no
//     task runs inside the add(), add_at() or reschedule() that scheduled it (one already due runs
//     at the next drive, which passes until nothing is due);
//     cancel() and reschedule() return true exactly when the model says pending; is_pending(),
//     size() and next_expiration() agree with the model; add() past max_pending throws.
//   operations: exactly one on_complete() each, on_expiration() only after an expiry; an expiry
//     only at/after the timeout, never inside the call that watched it (at once only when the
//     timer refused the timeout); completion only
//     by the call the model says completes it; watched() and num_delayed() match the model;
//     check_and_complete() and cancel_for_key() act on exactly the operations the model names.
//   teardown: shutdown() gives every waiting operation Outcome::shut_down, close() hands back
//     exactly the pending tasks, and nothing leaks (LeakSanitizer).
// Task callbacks may re-add their own task, cancel another task or force-complete an operation,
// which exercises the timer's re-entrancy from inside advance_clock().
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_script.hpp"
#include "purgatory/delayed_operation.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/errors.hpp"
#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/executor.hpp"
#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "purgatory/timer/timer_task.hpp"
#include "timer_purgatory_model.hpp"

namespace purgatory::fuzz {

constexpr int kTasks = 6;
constexpr int kOps = 6;
constexpr int kKeys = 4;
constexpr std::size_t kMaxSteps = 400;

class Harness {
 public:
  Harness(Script& s)
      : script_(s),
        tick_(static_cast<std::int64_t>(1 + s.byte() % 5) * 1'000'000),
        wheel_size_(2 + s.byte() % 63),
        clock_(Nanos{static_cast<std::int64_t>(s.byte()) * 37 * kUnit}) {
    const std::uint8_t b = s.byte();
    shards_ = std::size_t{1} << (b & 3);
    const int limit = b >> 2;  // 0..63
    max_pending_ = limit < 48 ? 0 : static_cast<std::size_t>(limit - 47);

    purgatory::TimerOptions options;
    options.name = "fuzz";
    options.tick = Nanos{tick_};
    options.wheel_size = wheel_size_;
    options.clock = &clock_;
    options.executor = std::make_shared<purgatory::InlineExecutor>();
    options.driver = purgatory::TimerOptions::Driver::external;
    options.max_pending = max_pending_;
    options.on_task_error = [](const TimerTask&, std::exception_ptr) {
      fail("a task threw (the harness's callbacks never throw)");
    };
    driver_.reset();
    timer_ = std::make_shared<SystemTimer>(std::move(options));
    driver_.emplace(*timer_);

    purgatory::PurgatoryOptions popts;
    popts.name = "fuzz";
    popts.shards = shards_;
    popts.on_callback_error = [](const purgatory::DelayedOperation&, std::exception_ptr,
                                 std::string_view where) {
      fail("an operation callback threw in {}", where);
    };
    purgatory_ = std::make_unique<DelayedOperationPurgatory<int>>(timer_, popts);

    for (int i = 0; i < kTasks; ++i) {
      tasks_[i].task = purgatory::make_task<ModelTask>(*this, i);
    }
    ops_.reserve(kMaxSteps + 1);
    wheel_time_ = round_down(now());
  }

  void run() {
    for (std::size_t step = 0; step < kMaxSteps && !script_.done(); ++step) {
      const std::uint8_t op = script_.byte();
      if (trace_) fmt::print(stderr, "step {} at {} ns: opcode {}\n", step, now(), op % 16);
      switch (op % 16) {
        case 0:
        case 14:
          add(script_.byte() % kTasks, script_.duration(), read_action());
          break;
        case 1:
          add_at(script_.byte() % kTasks);
          break;
        case 2:
          reschedule(script_.byte() % kTasks, script_.duration());
          break;
        case 3:
          cancel(script_.byte() % kTasks);
          break;
        case 4:
        case 15:
          advance(script_.duration(), true);
          break;
        case 5:
          advance(script_.duration(), false);
          break;
        case 6:
          drive();
          break;
        case 7:
          advance(static_cast<std::int64_t>(script_.byte()) * 64 * kUnit, true);
          break;
        case 8:
          watch(script_.byte() % kOps);
          break;
        case 9:
          set_ready(script_.byte() % kOps);
          break;
        case 10:
          check_key(script_.byte() % kKeys);
          break;
        case 11:
          force(script_.byte() % kOps);
          break;
        case 12:
          cancel_for_key(script_.byte() % kKeys);
          break;
        case 13:
          rewatch(script_.byte() % kOps);
          break;
      }
      check_state("after a step");
    }
    teardown();
  }

  // ---- tasks ------------------------------------------------------------------------------------

  void on_task_run(int slot) {
    TaskModel& t = tasks_[slot];
    const std::int64_t now = this->now();
    check(t.pending, "task {} ran while not pending (twice, or after cancel)", slot);
    check(now >= t.deadline, "task {} ran early: now {} < deadline {}", slot, now, t.deadline);
    check(now >= t.expiration, "task {} ran before its tick: now {} < rounded deadline {}", slot,
          now, t.expiration);
    t.pending = false;
    ++t.runs;
    const Action a = std::exchange(t.action, Action{});
    switch (a.kind) {
      case Action::Kind::none:
        break;
      case Action::Kind::re_add:
        add(slot, a.delay, Action{});
        break;
      case Action::Kind::cancel_task:
        cancel(a.target);
        break;
      case Action::Kind::force_op:
        force(a.target);
        break;
    }
  }

  Action read_action() {
    const std::uint8_t b = script_.byte();
    Action a;
    switch (b % 8) {
      case 5:
        a.kind = Action::Kind::re_add;
        a.delay = script_.duration();
        break;
      case 6:
        a.kind = Action::Kind::cancel_task;
        a.target = script_.byte() % kTasks;
        break;
      case 7:
        a.kind = Action::Kind::force_op;
        a.target = script_.byte() % kOps;
        break;
      default:
        break;
    }
    return a;
  }

  void add(int slot, std::int64_t delay, Action action) {
    TaskModel& t = tasks_[slot];
    const std::int64_t now = this->now();
    // Every scheduled task holds a unit of max_pending, a task due at once included.
    if (would_reject(task_holds_unit(t))) {
      try {
        timer_->add(t.task, Nanos{delay});
      } catch (const purgatory::TimerRejected& e) {
        check(e.reason() == purgatory::TimerRejected::Reason::pending_limit, "wrong reject reason");
        return;
      }
      fail("add() of task {} accepted past max_pending {}", slot, max_pending_);
    }
    note_schedule(task_in_wheel(t));
    schedule(t, delay <= 0 ? now : now + delay, delay <= 0 ? now : round_up(now + delay), action,
             delay <= 0);
    const std::uint64_t runs = t.runs;
    timer_->add(t.task, Nanos{delay});
    check(t.runs == runs, "task {} added with delay {} ran inside add()", slot, delay);
  }

  void add_at(int slot) {
    TaskModel& t = tasks_[slot];
    const std::int64_t now = this->now();
    // An absolute deadline up to 64 units in the past or 190 in the future.
    const std::int64_t deadline =
        std::max<std::int64_t>(0, now + (static_cast<std::int64_t>(script_.byte()) - 64) * kUnit);
    if (would_reject(task_holds_unit(t))) {
      try {
        timer_->add_at(t.task, Nanos{deadline});
      } catch (const purgatory::TimerRejected&) {
        return;
      }
      fail("add_at() of task {} accepted past max_pending {}", slot, max_pending_);
    }
    // add_at() reads no clock: the deadline goes to its bucket unless the wheel's own clock has
    // reached it (then to the due list); either way it runs at a drive, never inside add_at().
    note_schedule(task_in_wheel(t));
    const bool at_once = runs_at_once(deadline);
    schedule(t, deadline, at_once ? now : round_up(deadline), Action{}, at_once);
    const std::uint64_t runs = t.runs;
    timer_->add_at(t.task, Nanos{deadline});
    check(t.runs == runs, "task {} ran inside add_at()", slot);
  }

  void reschedule(int slot, std::int64_t delay) {
    TaskModel& t = tasks_[slot];
    const bool expected = t.pending;
    const std::int64_t now = this->now();
    const std::uint64_t runs = t.runs;
    // A scheduled task keeps its unit of max_pending when moved; one taken out by a drive and not
    // yet started takes a unit again, and past the limit it is refused and stays as it was.
    if (expected && would_reject(task_holds_unit(t))) {
      try {
        (void)timer_->reschedule(*t.task, Nanos{delay});
      } catch (const purgatory::TimerRejected& e) {
        check(e.reason() == purgatory::TimerRejected::Reason::pending_limit, "wrong reject reason");
        check(t.task->is_pending(), "task {}: a refused reschedule() dropped it", slot);
        return;
      }
      fail("reschedule() of due task {} into the wheel accepted past max_pending {}", slot,
           max_pending_);
    }
    if (expected) {
      note_schedule(task_in_wheel(t));
      schedule(t, delay <= 0 ? now : now + delay, delay <= 0 ? now : round_up(now + delay),
               t.action, delay <= 0);
    }
    const bool got = timer_->reschedule(*t.task, Nanos{delay});
    check(got == expected, "reschedule(task {}) returned {}, model says pending={}", slot, got,
          expected);
    check(t.runs == runs, "task {} ran inside reschedule()", slot);
  }

  void cancel(int slot) {
    TaskModel& t = tasks_[slot];
    const bool expected = t.pending;
    const bool got = t.task->cancel();
    check(got == expected, "cancel(task {}) returned {}, model says pending={}", slot, got,
          expected);
    t.pending = false;
  }

  // The model's side of add(): the task is pending from now on, at the new deadline (`due`: in
  // the due list, for the next drive).
  void schedule(TaskModel& t, std::int64_t deadline, std::int64_t expiration, Action action,
                bool due) {
    t.pending = true;
    t.due = due;
    t.deadline = deadline;
    t.expiration = expiration;
    t.action = action;
  }

  // The timer's wheel keeps its own clock, moved by an expiry pass and by an add() into an empty
  // wheel; add_at() compares against it. `self_in_wheel`: the task being added is linked already
  // (the timer unlinks it before looking at the count).
  void note_schedule(bool self_in_wheel) {
    if (in_wheel() - (self_in_wheel ? 1 : 0) == 0)
      wheel_time_ = std::max(wheel_time_, round_down(now()));
  }
  bool runs_at_once(std::int64_t deadline) const {
    return deadline <= 0 || round_up(deadline) < wheel_time_ + tick_;
  }

  // ---- time -------------------------------------------------------------------------------------

  void advance(std::int64_t by, bool and_drive) {
    clock_.advance(Nanos{by});
    if (and_drive) drive();
  }

  void drive() {
    in_drive_ = true;
    drive_now_ = now();
    // The pass moves the wheels' clocks when something is due: a bucket, or a step of the
    // ahead-of-time cascade of a coarse bucket (arm() says when the next of either is).
    if (const std::optional<Nanos> next = driver_->arm(); next && next->count() <= drive_now_) {
      wheel_time_ = std::max(wheel_time_, round_down(drive_now_));
    }
    // As a reaper does: passes until one finds nothing due (a task a run re-adds when already
    // due waits for the next pass; the actions run once, so this ends).
    while (driver_->advance_clock(Nanos::zero())) {
    }
    in_drive_ = false;
    check_all_due_ran(now());
  }

  // ---- operations -------------------------------------------------------------------------------

  OpModel* slot_op(int slot) {
    return op_slot_[slot] < 0 ? nullptr : &ops_[static_cast<std::size_t>(op_slot_[slot])];
  }

  void watch(int slot) {
    const unsigned keys = (script_.byte() % 15U) + 1U;  // non-empty subset of 4 keys
    std::int64_t timeout = script_.duration();
    const std::uint8_t flags = script_.byte();
    if ((flags & 0x0F) == 0x0F) timeout = -timeout;  // a negative timeout: expires at once
    const bool ready = (flags & 0x10) != 0;
    if (const OpModel* old = slot_op(slot);
        old != nullptr && (old->state == OpState::pending || old->state == OpState::detached)) {
      return;  // the slot's operation still waits: leave it to force/cancel
    }
    const auto id = static_cast<int>(ops_.size());
    ops_.emplace_back();
    op_slot_[slot] = id;
    OpModel& m = ops_.back();
    m.ready = ready;
    m.op = purgatory::make_operation(
        Nanos{timeout}, [this, id] { return ops_[static_cast<std::size_t>(id)].ready; },
        [this, id](Outcome o) { on_op_complete(id, o); }, [this, id] { on_op_expiration(id); });

    // The purgatory schedules the expiry with add_at(watch time + timeout).
    const std::int64_t now = this->now();
    m.keys = keys;
    m.deadline = now + std::max<std::int64_t>(timeout, 0);
    m.expect_complete = ready;
    m.may_expire_early = !ready && would_reject(false);
    if (!ready && !m.may_expire_early) note_schedule(false);
    const bool at_once = runs_at_once(m.deadline);
    m.expiration = at_once ? now : round_up(m.deadline);
    m.in_wheel = !ready && !m.may_expire_early;
    m.due = at_once;
    m.state = OpState::pending;

    std::vector<int> key_list;
    for (int k = 0; k < kKeys; ++k) {
      if ((keys & (1U << k)) != 0) key_list.push_back(k);
    }
    const bool completed = purgatory_->try_complete_else_watch(m.op, key_list);
    OpModel& after = ops_[static_cast<std::size_t>(id)];
    after.expect_complete = false;
    check(completed == ready, "try_complete_else_watch(op {}) returned {}, condition is {}", id,
          completed, ready);
    if (ready) {
      check(after.state == OpState::completed, "op {} completed at watch but on_complete missing",
            id);
    } else if (after.may_expire_early) {
      check(after.state == OpState::expired,
            "op {} with timeout {}: the timer refused it, yet it "
            "did not expire at once",
            id, timeout);
    } else {
      check(after.state == OpState::pending,
            "op {} with timeout {} expired inside try_complete_else_watch()", id, timeout);
    }
  }

  void rewatch(int slot) {
    OpModel* m = slot_op(slot);
    if (m == nullptr) return;
    try {
      (void)purgatory_->try_complete_else_watch(m->op, {0});
    } catch (const purgatory::OperationAlreadyWatched&) {
      return;
    }
    fail("a second try_complete_else_watch of op {} was accepted", op_slot_[slot]);
  }

  void set_ready(int slot) {
    if (OpModel* m = slot_op(slot)) m->ready = !m->ready;
  }

  void check_key(int key) {
    std::vector<int> expected;
    for (std::size_t id = 0; id < ops_.size(); ++id) {
      OpModel& m = ops_[id];
      if (m.state == OpState::pending && (m.keys & (1U << key)) != 0 && m.ready) {
        m.expect_complete = true;
        expected.push_back(static_cast<int>(id));
      }
    }
    const std::size_t n = purgatory_->check_and_complete(key);
    check(n == expected.size(), "check_and_complete({}) completed {}, model expects {}", key, n,
          expected.size());
    for (int id : expected) {
      OpModel& m = ops_[static_cast<std::size_t>(id)];
      m.expect_complete = false;
      check(m.state == OpState::completed, "check_and_complete({}) left op {} uncompleted", key,
            id);
    }
  }

  void force(int slot) {
    OpModel* m = slot_op(slot);
    if (m == nullptr) return;
    const int id = op_slot_[slot];
    const bool expected = m->state == OpState::pending || m->state == OpState::detached;
    m->expect_complete = expected;
    const bool got = m->op->force_complete();
    m = &ops_[static_cast<std::size_t>(id)];
    m->expect_complete = false;
    check(got == expected, "force_complete(op {}) returned {}, model expects {}", id, got,
          expected);
    if (expected) {
      check(m->state == OpState::completed && m->completes == 1,
            "force_complete(op {}) returned before on_complete ran", id);
    }
  }

  void cancel_for_key(int key) {
    const bool force_now = (script_.byte() & 1) != 0;
    std::vector<const purgatory::DelayedOperation*> expected;
    for (OpModel& m : ops_) {
      if (m.state == OpState::pending && (m.keys & (1U << key)) != 0)
        expected.push_back(m.op.get());
    }
    const std::vector<OperationRef> got = purgatory_->cancel_for_key(key);
    std::vector<const purgatory::DelayedOperation*> got_ptrs;
    for (const OperationRef& op : got)
      got_ptrs.push_back(op.get());
    std::sort(expected.begin(), expected.end());
    std::sort(got_ptrs.begin(), got_ptrs.end());
    check(got_ptrs == expected, "cancel_for_key({}) returned {} operations, model expects {}", key,
          got_ptrs.size(), expected.size());
    for (OpModel& m : ops_) {
      if (std::binary_search(expected.begin(), expected.end(), m.op.get())) {
        m.state = OpState::detached;
        m.in_wheel = false;
      }
    }
    if (force_now) {
      for (std::size_t id = 0; id < ops_.size(); ++id) {
        if (ops_[id].state != OpState::detached) continue;
        ops_[id].expect_complete = true;
        check(ops_[id].op->force_complete(), "force_complete of cancelled op {} returned false",
              id);
        ops_[id].expect_complete = false;
      }
    }
  }

  void on_op_complete(int id, Outcome o) {
    OpModel& m = ops_[static_cast<std::size_t>(id)];
    const std::int64_t now = this->now();
    check(m.completes == 0, "op {} got a second on_complete ({})", id, purgatory::to_string(o));
    ++m.completes;
    check(m.op->outcome() == o, "op {}: on_complete({}) but outcome() is {}", id,
          purgatory::to_string(o), purgatory::to_string(m.op->outcome()));
    switch (o) {
      case Outcome::completed:
        check(m.expect_complete, "op {} completed by a call that should not complete it", id);
        m.state = OpState::completed;
        break;
      case Outcome::expired:
        check(m.state == OpState::pending, "op {} expired while not waiting", id);
        if (!m.may_expire_early) {
          check(now >= m.deadline && now >= m.expiration,
                "op {} expired early: now {}, deadline {}, rounded {}", id, now, m.deadline,
                m.expiration);
        }
        m.state = OpState::expired;
        break;
      case Outcome::shut_down:
        check(shutting_down_ && m.state == OpState::pending, "op {} shut down unexpectedly", id);
        m.state = OpState::shut_down;
        break;
      case Outcome::cancelled:
        fail("op {} cancelled: the harness never cancels an operation", id);
      case Outcome::pending:
        fail("op {}: on_complete with a pending outcome", id);
    }
    m.in_wheel = false;
  }

  void on_op_expiration(int id) {
    OpModel& m = ops_[static_cast<std::size_t>(id)];
    check(m.state == OpState::expired && m.expirations == 0,
          "op {}: on_expiration without an expiry, or twice", id);
    ++m.expirations;
  }

  // ---- checks -----------------------------------------------------------------------------------

  std::int64_t now() const { return clock_.now().count(); }
  std::int64_t round_up(std::int64_t t) const { return (t + tick_ - 1) / tick_ * tick_; }
  std::int64_t round_down(std::int64_t t) const { return t / tick_ * tick_; }

  // Linked in the wheel, as the timer counts it for max_pending and for catching up an empty
  // wheel: not the due list; during a drive, what is due has been taken out.
  bool task_in_wheel(const TaskModel& t) const {
    return t.pending && !t.due && (!in_drive_ || t.expiration > drive_now_);
  }
  bool op_in_wheel(const OpModel& m) const {
    return m.in_wheel && !m.due && (!in_drive_ || m.expiration > drive_now_);
  }
  // What size() counts, between steps: every pending task and scheduled timeout, due or not.
  std::size_t scheduled() const {
    std::size_t n = 0;
    for (const TaskModel& t : tasks_)
      n += t.pending ? 1 : 0;
    for (const OpModel& m : ops_)
      n += m.in_wheel ? 1 : 0;
    return n;
  }
  std::size_t in_wheel() const {
    std::size_t n = 0;
    for (const TaskModel& t : tasks_)
      n += task_in_wheel(t) ? 1 : 0;
    for (const OpModel& m : ops_)
      n += op_in_wheel(m) ? 1 : 0;
    return n;
  }
  // What max_pending counts: every scheduled task, in the wheel or on the due list; during a drive,
  // what is due has been taken out and gave its unit back.
  bool task_holds_unit(const TaskModel& t) const {
    return t.pending && (!in_drive_ || t.expiration > drive_now_);
  }
  std::size_t units() const {
    std::size_t n = 0;
    for (const TaskModel& t : tasks_)
      n += task_holds_unit(t) ? 1 : 0;
    for (const OpModel& m : ops_)
      n += m.in_wheel && (!in_drive_ || m.expiration > drive_now_) ? 1 : 0;
    return n;
  }
  bool would_reject(bool already_holds_unit) const {
    return max_pending_ != 0 && !already_holds_unit && units() >= max_pending_;
  }

  void check_all_due_ran(std::int64_t now) {
    for (int i = 0; i < kTasks; ++i) {
      const TaskModel& t = tasks_[i];
      check(!t.pending || t.expiration > now,
            "task {} did not run: rounded deadline {} <= now {} after advance_clock", i,
            t.expiration, now);
    }
    for (std::size_t id = 0; id < ops_.size(); ++id) {
      const OpModel& m = ops_[id];
      check(!(m.state == OpState::pending && m.in_wheel && m.expiration <= now),
            "op {} did not expire: rounded deadline {} <= now {} after advance_clock", id,
            m.expiration, now);
    }
  }

  void check_state(const char* when) {
    std::optional<std::int64_t> earliest;
    for (int i = 0; i < kTasks; ++i) {
      const TaskModel& t = tasks_[i];
      check(t.task->is_pending() == t.pending, "{}: task {} is_pending() {} but model {}", when, i,
            t.task->is_pending(), t.pending);
      if (t.pending) earliest = std::min(earliest.value_or(t.expiration), t.expiration);
    }
    std::size_t watched = 0;
    std::size_t delayed = 0;
    for (std::size_t id = 0; id < ops_.size(); ++id) {
      const OpModel& m = ops_[id];
      const Outcome want = m.state == OpState::completed   ? Outcome::completed
                           : m.state == OpState::expired   ? Outcome::expired
                           : m.state == OpState::shut_down ? Outcome::shut_down
                                                           : Outcome::pending;
      check(m.op->outcome() == want, "{}: op {} outcome() {} but model {}", when, id,
            purgatory::to_string(m.op->outcome()), purgatory::to_string(want));
      check(m.completes == (want == Outcome::pending ? 0 : 1), "{}: op {} on_complete ran {} times",
            when, id, m.completes);
      check(m.expirations == (want == Outcome::expired ? 1 : 0),
            "{}: op {} on_expiration ran {} times", when, id, m.expirations);
      if (m.state == OpState::pending) {
        watched += static_cast<std::size_t>(std::popcount(m.keys));
        ++delayed;
      }
      if (m.in_wheel) earliest = std::min(earliest.value_or(m.expiration), m.expiration);
    }
    check(purgatory_->watched() == watched, "{}: watched() {} but model {}", when,
          purgatory_->watched(), watched);
    check(purgatory_->num_delayed() == delayed, "{}: num_delayed() {} but model {}", when,
          purgatory_->num_delayed(), delayed);
    check(timer_->size() == scheduled(), "{}: timer size() {} but model {}", when, timer_->size(),
          scheduled());
    const std::optional<Nanos> next = timer_->next_expiration();
    check(next.has_value() == earliest.has_value(), "{}: next_expiration() presence differs", when);
    if (next) {
      check(next->count() <= *earliest, "{}: next_expiration() {} is after the earliest task {}",
            when, next->count(), *earliest);
    }
  }

  void teardown() {
    for (std::size_t id = 0; id < ops_.size(); ++id) {
      if (ops_[id].state != OpState::detached) continue;
      ops_[id].expect_complete = true;
      check(ops_[id].op->force_complete(), "force_complete of cancelled op {} returned false", id);
      ops_[id].expect_complete = false;
    }
    shutting_down_ = true;
    purgatory_->shutdown();
    for (std::size_t id = 0; id < ops_.size(); ++id) {
      const OpModel& m = ops_[id];
      check(m.completes == 1 && m.op->outcome() != Outcome::pending,
            "op {} ended with {} on_complete calls, outcome {}", id, m.completes,
            purgatory::to_string(m.op->outcome()));
      check(m.state != OpState::pending && m.state != OpState::detached, "op {} still waits", id);
    }
    check(purgatory_->watched() == 0 && purgatory_->num_delayed() == 0,
          "shutdown() left operations watched");
    std::size_t pending = 0;
    for (const TaskModel& t : tasks_)
      pending += t.pending ? 1 : 0;
    const std::vector<purgatory::TaskRef> handed_back = timer_->close();
    check(handed_back.size() == pending, "close() handed back {} tasks, model has {} pending",
          handed_back.size(), pending);
    for (const purgatory::TaskRef& t : handed_back) {
      check(!t->is_pending(), "a task handed back by close() is still pending");
    }
  }

 private:
  Script& script_;
  const std::int64_t tick_;
  const int wheel_size_;
  ManualClock clock_;
  std::size_t shards_ = 1;
  std::size_t max_pending_ = 0;
  std::shared_ptr<SystemTimer> timer_;
  std::optional<purgatory::ExternalDriver> driver_;  // after timer_: detached first
  std::unique_ptr<DelayedOperationPurgatory<int>> purgatory_;
  TaskModel tasks_[kTasks];
  std::vector<OpModel> ops_;  // every operation created, by id
  int op_slot_[kOps] = {-1, -1, -1, -1, -1, -1};
  std::int64_t wheel_time_ = 0;  // the wheel's clock, as the model infers it
  bool in_drive_ = false;
  std::int64_t drive_now_ = 0;
  bool shutting_down_ = false;
  // FUZZ_MODEL_TRACE=1 prints each step: for reading a crash input (see README.md).
  const bool trace_ = std::getenv("FUZZ_MODEL_TRACE") != nullptr;
};

void ModelTask::run() {
  h_.on_task_run(slot_);
}

}  // namespace purgatory::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  purgatory::fuzz::Script script(data, size);
  purgatory::fuzz::Harness harness(script);
  harness.run();
  return 0;
}
