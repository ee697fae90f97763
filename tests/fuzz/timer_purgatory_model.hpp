// The reference model of fuzz_timer_purgatory_model: what it knows of each task and each
// operation, against which the harness checks the timer and the purgatory after every step.
#pragma once

#include <cstdint>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/timer/ref.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory::fuzz {

class Harness;

// What a task does when it runs (for one schedule).
struct Action {
  enum class Kind : std::uint8_t { none, re_add, cancel_task, force_op } kind = Kind::none;
  int target = 0;          // task or operation slot
  std::int64_t delay = 0;  // re_add
};

class ModelTask final : public TimerTask {
 public:
  ModelTask(Harness& h, int slot) : h_(h), slot_(slot) {}

 protected:
  void run() override;

 private:
  Harness& h_;
  int slot_;
};

struct TaskModel {
  purgatory::Ref<ModelTask> task;
  bool pending = false;
  bool due = false;             // added when already due: in its base's due list, not the wheel
  std::int64_t deadline = 0;    // clock time it may run from
  std::int64_t expiration = 0;  // deadline rounded up to the tick: it must have run by then
  Action action;
  std::uint64_t runs = 0;
};

enum class OpState : std::uint8_t { pending, detached, completed, expired, shut_down };

struct OpModel {
  OperationRef op;
  OpState state = OpState::pending;
  unsigned keys = 0;  // bit k: watched on key k (while pending)
  std::int64_t deadline = 0;
  std::int64_t expiration = 0;
  bool in_wheel = false;          // its timeout is scheduled on the timer (the wheel or due list)
  bool due = false;               // that timeout was due when added: in the due list
  bool ready = false;             // what its try_complete() condition returns
  bool expect_complete = false;   // the current call may complete it
  bool may_expire_early = false;  // the timer refused its timeout: it expires at once
  int completes = 0;
  int expirations = 0;
};

}  // namespace purgatory::fuzz
