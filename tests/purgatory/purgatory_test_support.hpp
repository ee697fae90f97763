// Shared helpers for the purgatory suites: a purgatory on a manual clock, Kafka's mock operation,
// and waiting on a condition with a generous timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "manual_timer.hpp"
#include "operation_timeout.hpp"
#include "purgatory/delayed_operation.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "sanitizers.hpp"

namespace purgatory::test {

using testing::cancel_timeout;
using testing::timeout_pending;
using testing::timeout_task;

using namespace std::chrono_literals;

template <class Key = std::string>
struct ManualPurgatory {
  explicit ManualPurgatory(PurgatoryOptions options = {}) : purgatory(manual.timer, options) {}
  // A test that calls the purgatory (so its timer) from several threads asks for thread_safe.
  explicit ManualPurgatory(TimerOptions::Concurrency concurrency, PurgatoryOptions options = {})
      : manual(concurrency), purgatory(manual.timer, options) {}
  void advance(Nanos by) { manual.advance(by); }

  ManualTimer manual;
  DelayedOperationPurgatory<Key> purgatory;
};

// What the tests' operations count: whether a check may complete it, and how often each of its
// callbacks ran.
class CountingOperation : public DelayedOperation {
 public:
  explicit CountingOperation(Nanos timeout) : DelayedOperation(timeout) {}

  std::atomic<bool> completable{false};
  std::atomic<int> tries{0};
  std::atomic<int> completions{0};
  std::atomic<int> expirations{0};
};

// Kafka's MockDelayedOperation: completes when `completable` is set and a check runs.
class MockOperation : public CountingOperation {
 public:
  explicit MockOperation(Nanos timeout) : CountingOperation(timeout) {}

  std::atomic<bool> lock_held_in_try{true};  // stays true only if every try held the lock
  std::atomic<bool> lock_held_in_complete{false};

 protected:
  bool try_complete() override {
    tries.fetch_add(1);
    if (!lock_held_by_current_thread()) lock_held_in_try = false;
    return completable.load() && force_complete();
  }
  void on_complete() override {
    if (lock_held_by_current_thread()) lock_held_in_complete = true;
    completions.fetch_add(1);
  }
  void on_expiration() override { expirations.fetch_add(1); }
};

using MockRef = purgatory::Ref<MockOperation>;

inline MockRef mock(Nanos timeout) {
  return make_operation<MockOperation>(timeout);
}

// Polls `cond` until it holds or `timeout` passes; returns whether it held. For real-time tests.
template <class Cond>
bool eventually(Cond cond, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(200us);
  }
  return true;
}

}  // namespace purgatory::test
