// Helpers for the purgatory contract suite: an operation that records everything a promise is
// about (which thread, which lock, in which order), round counts scaled for sanitizers, a way to
// read what the library printed to stderr, and calls held in the windows the promises speak of.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include <doctest/doctest.h>

#include "contract_support.hpp"
#include "operation_timeout.hpp"
#include "purgatory/delayed_future.hpp"
#include "purgatory/delayed_operation.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "purgatory_test_support.hpp"
#include "race_schedule.hpp"
#include "sanitizers.hpp"

namespace purgatory::contract {

using testing::cancel_timeout;
using testing::timeout_pending;
using testing::timeout_task;

using test::kSanitized;
using test::rounds;

// An operation that records what its callbacks saw. Hooks (on_try, on_done, on_expired) are set
// before the operation is shared and not changed after.
class Probe : public test::CountingOperation {
 public:
  explicit Probe(Nanos timeout) : CountingOperation(timeout) {}

  std::atomic<int> running_tries{0};        // try_complete() runs in progress now
  std::atomic<bool> concurrent_try{false};  // two try_complete() ran at once
  std::atomic<bool> try_without_lock{false};
  std::atomic<bool> try_after_outcome{false};
  std::atomic<bool> try_during_callbacks{false};
  std::atomic<bool> callback_with_lock{false};
  std::atomic<bool> in_callbacks{false};
  std::atomic<bool> callbacks_done{false};
  std::atomic<bool> expiration_out_of_order{
      false};  // on_expiration() not right after on_complete()
  std::atomic<Outcome> seen_in_on_complete{Outcome::pending};
  std::thread::id try_thread{};       // the last try_complete()'s thread
  std::thread::id complete_thread{};  // written before completions is incremented

  std::function<bool()> on_try{};  // runs inside try_complete(); true: force_complete()
  std::function<void()> on_done{};
  std::function<void()> on_expired{};

 protected:
  bool try_complete() override {
    tries.fetch_add(1);
    if (running_tries.fetch_add(1) != 0) concurrent_try = true;
    if (!lock_held_by_current_thread()) try_without_lock = true;
    if (outcome() != Outcome::pending) try_after_outcome = true;
    if (in_callbacks.load()) try_during_callbacks = true;
    try_thread = std::this_thread::get_id();
    bool complete = completable.load();
    if (on_try && on_try()) complete = true;
    running_tries.fetch_sub(1);
    return complete && force_complete();
  }
  void on_complete() override {
    in_callbacks = true;
    if (lock_held_by_current_thread()) callback_with_lock = true;
    if (running_tries.load() != 0) try_during_callbacks = true;
    seen_in_on_complete = outcome();
    complete_thread = std::this_thread::get_id();
    if (on_done) on_done();
    completions.fetch_add(1);
    if (outcome() != Outcome::expired) {
      in_callbacks = false;
      callbacks_done = true;
    }
  }
  void on_expiration() override {
    if (completions.load() != 1 || !in_callbacks.load()) expiration_out_of_order = true;
    if (lock_held_by_current_thread()) callback_with_lock = true;
    if (on_expired) on_expired();
    expirations.fetch_add(1);
    in_callbacks = false;
    callbacks_done = true;
  }
};

using ProbeRef = purgatory::Ref<Probe>;

inline ProbeRef probe(Nanos timeout) {
  return make_operation<Probe>(timeout);
}

// Every flag a Probe raises when a promise about its callbacks broke.
inline void check_callbacks_sound(const Probe& op) {
  CHECK_FALSE(op.concurrent_try.load());
  CHECK_FALSE(op.try_without_lock.load());
  CHECK_FALSE(op.try_after_outcome.load());
  CHECK_FALSE(op.try_during_callbacks.load());
  CHECK_FALSE(op.callback_with_lock.load());
  CHECK_FALSE(op.expiration_out_of_order.load());
}

// `call` on a thread of its own, held inside the on_complete() of `op` (a Probe it decides) until
// release(): the window in which that call (a shutdown(), a check) waits for a callback.
class HeldInCallback {
 public:
  template <class Call>
  HeldInCallback(Probe& op, Call call) {
    op.on_done = [this] {
      entered_.set();
      CHECK(released_.wait());
    };
    thread_ = std::thread(std::move(call));
  }
  ~HeldInCallback() { release(); }
  HeldInCallback(const HeldInCallback&) = delete;
  HeldInCallback& operator=(const HeldInCallback&) = delete;

  // Waits until the call is inside the callback; false if it never got there.
  bool entered() { return entered_.wait(); }
  // Lets the callback return, and waits for the call to.
  void release() {
    released_.set();
    if (thread_.joinable()) thread_.join();
  }

 private:
  Signal entered_;
  Signal released_;
  std::thread thread_;
};

// check_and_complete(key) of `p` on a thread of its own, held where it has copied the key's list
// and not yet tried the operations in it, until release(): the window in which what the check
// holds may be decided, handed back or cancelled by someone else.
template <class Purgatory, class Key>
class HeldCheck {
 public:
  HeldCheck(Purgatory& p, Key key)
      : schedule_(test::RaceSchedule::at_each("check_and_complete: copied",
                                              [this] {
                                                copied_.set();
                                                CHECK(released_.wait());
                                              })),
        thread_([this, &p, key] { completed_ = p.check_and_complete(key); }) {}
  ~HeldCheck() { (void)release(); }
  HeldCheck(const HeldCheck&) = delete;
  HeldCheck& operator=(const HeldCheck&) = delete;

  // Waits until the check has copied the key's list; false if it never did.
  bool copied() { return copied_.wait(); }
  // Lets the check go on and waits for it: the number of operations it completed.
  std::size_t release() {
    released_.set();
    if (thread_.joinable()) thread_.join();
    return completed_;
  }

 private:
  Signal copied_;
  Signal released_;
  std::size_t completed_ = 99;
  test::RaceSchedule schedule_;
  std::thread thread_;
};

}  // namespace purgatory::contract

// What every purgatory contract test names unqualified.
namespace purgatory::test {
using contract::check_callbacks_sound;
using contract::HeldCheck;
using contract::HeldInCallback;
using contract::probe;
using contract::ProbeRef;
using contract::Signal;

// Helpers shared by a header's contract tests and its race tests.

// What a DelayedFuture's response callback saw.
struct Response {
  std::atomic<int> calls{0};
  std::atomic<Outcome> outcome{Outcome::pending};
  std::thread::id thread;  // written before calls is incremented
  std::size_t futures = 0;
  std::size_t done_futures = 0;

  DelayedFuture<int>::Callback callback() {
    return [this](const std::vector<SharedFuture<int>>& fs, Outcome o) {
      futures = fs.size();
      done_futures = 0;
      for (const auto& f : fs)
        done_futures += f.is_done() ? 1 : 0;
      outcome = o;
      thread = std::this_thread::get_id();
      calls.fetch_add(1);
    };
  }
};

// An outcome listener that counts its calls, keeps the outcome, and notes a call made before the
// operation's callbacks finished or with its lock held.
class Listener final : public detail::OutcomeListener {
 public:
  Listener(std::atomic<int>& calls, std::atomic<Outcome>& seen, const ProbeRef& op,
           std::atomic<bool>& before_callbacks)
      : calls_(calls), seen_(seen), op_(op.get()), before_callbacks_(before_callbacks) {}
  void on_outcome(Outcome outcome) noexcept override {
    if (!op_->callbacks_done.load() || op_->lock_held_by_current_thread()) before_callbacks_ = true;
    seen_ = outcome;
    calls_.fetch_add(1);
  }

 private:
  std::atomic<int>& calls_;
  std::atomic<Outcome>& seen_;
  contract::Probe* op_;
  std::atomic<bool>& before_callbacks_;
};

// A key whose copy throws while `fail_copies` is set: the purgatory copies keys into its map.
struct FragileKey {
  static inline std::atomic<bool> fail_copies{false};
  int value = 0;
  explicit FragileKey(int v) : value(v) {}
  FragileKey(const FragileKey& other) : value(other.value) {
    if (fail_copies.load()) throw std::bad_alloc();
  }
  FragileKey& operator=(const FragileKey&) = default;
  bool operator==(const FragileKey& other) const { return value == other.value; }
};
struct FragileKeyHash {
  std::size_t operator()(const FragileKey& k) const { return std::hash<int>{}(k.value); }
};

// What a refused call must leave: nothing of the operation anywhere, and a retry that works.
template <class P>
void check_refused_left_nothing(P& purgatory, SystemTimer& timer, const ProbeRef& op,
                                std::size_t timer_size_before) {
  CHECK(purgatory.watched() == 0);
  CHECK(purgatory.num_delayed() == 0);
  CHECK(timer.size() == timer_size_before);
  CHECK_FALSE(op->was_watched());
  CHECK(op->outcome() == Outcome::pending);
  CHECK(op->completions == 0);
  const auto m = purgatory.metrics();
  CHECK(m.completed_total + m.expired_total + m.shut_down_total + m.cancelled_total == 0);
}

// Watches `op` on `keys`, which must be refused by a key copy throwing (FragileKey::fail_copies,
// set by the caller or meanwhile); key copies work again afterwards.
template <class P, std::size_t N>
void watch_expecting_copy_failure(P& purgatory, const ProbeRef& op,
                                  const std::array<FragileKey, N>& keys) {
  CHECK_THROWS_AS(purgatory.try_complete_else_watch(op, std::span<const FragileKey>(keys)),
                  std::bad_alloc);
  FragileKey::fail_copies = false;
}

}  // namespace purgatory::test
