// Helpers for the purgatory contract suite: an operation that records everything a promise is
// about (which thread, which lock, in which order), round counts scaled for sanitizers, and a
// way to read what the library printed to stderr.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include <unistd.h>

#include <doctest/doctest.h>

#include "contract_support.hpp"
#include "operation_timeout.hpp"
#include "purgatory/delayed_operation.hpp"
#include "purgatory_test_support.hpp"
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

}  // namespace purgatory::contract

// What every purgatory contract test names unqualified.
namespace purgatory::test {
using contract::check_callbacks_sound;
using contract::probe;
using contract::ProbeRef;
using contract::Signal;
}  // namespace purgatory::test
