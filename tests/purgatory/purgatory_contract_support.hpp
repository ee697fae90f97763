// Helpers for the purgatory contract suite: an operation that records everything a promise is
// about (which thread, which lock, in which order), round counts scaled for sanitizers, a way to
// read what the library printed to stderr, and calls held in the windows the promises speak of.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

#include <doctest/doctest.h>

#include "contract_support.hpp"
#include "operation_timeout.hpp"
#include "purgatory/delayed_operation.hpp"
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
}  // namespace purgatory::test
