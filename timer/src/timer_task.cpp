// TimerTask's side of the state word it shares with its SystemTimer (timer_task.hpp): where a
// task is, and cancel().
//
// word_ = (state << 32) | references, state = (sequence << 2) | phase. The state sits in the high
// half so that a change of state is an addition of (new - old) << 32 that wraps modulo 2^32
// without touching the count; the sequence grows each time the task is handed to an executor, so
// a stale job of an ExpiredBatch can never claim a later run (no ABA).
//
// place_ says where the task is, in one word: the bucket (TimerTaskList) holding it, or, while an
// add() is placing it or it is due at once, its timer base (kBaseTag set). The bucket knows its
// base (the wheel and lock of one of its SystemTimer's), so the base is not stored apart.
// kRetired is set unless that base holds the task now. The add() that takes the task out of idle
// or queued (one CAS of word_ to scheduled) stores its base, under that base's lock, just after
// the CAS; linking it into a bucket stores the bucket (same base); whoever takes a task out of
// scheduled (under its base's lock) marks the place retired before the state changes. So a
// scheduled task whose place reads retired is being placed by an add() that holds that base's
// lock: a cancel() or another add() yields and looks again. While the task is linked the word
// names its bucket (never retired, never a base); after it leaves one, it still names that
// bucket (or base), retired: the timer that last held it.
#include "purgatory/timer/timer_task.hpp"

#include <cstdint>
#include <thread>

#include "purgatory/timer/detail/race_point.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "timer_base.hpp"

namespace purgatory {

detail::TimerBase* TimerTask::base_of_place(std::uintptr_t place) noexcept {
  static_assert(
      alignof(detail::TimerTaskList) > kPlaceBits && alignof(detail::TimerBase) > kPlaceBits,
      "a task's place keeps its tags in the low bits of a bucket's or base's address");
  const std::uintptr_t address = place & ~kPlaceBits;
  if ((place & kBaseTag) != 0) return reinterpret_cast<detail::TimerBase*>(address);
  // A bucket this task is or was in: its base is fixed for the bucket's life (the timer's).
  return address == 0 ? nullptr : reinterpret_cast<const detail::TimerTaskList*>(address)->base_;
}

detail::TimerBase* TimerTask::holding_base() const noexcept {
  const std::uintptr_t place = place_.load(std::memory_order_acquire);
  return (place & kRetired) != 0 ? nullptr : base_of_place(place);
}

detail::TimerBase* TimerTask::last_base() const noexcept {
  return base_of_place(place_.load(std::memory_order_acquire));
}

bool TimerTask::cancel() noexcept {
  on_cancel();
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    const std::uint32_t s = state_of(w);
    switch (phase_of(s)) {
      case kIdle:
        return false;
      case kQueued:
        // Expired but not started: withdrawing it races only with the job's own claim (a CAS).
        // The job keeps its reference and drops it when it finds the run withdrawn.
        if (word_.compare_exchange_weak(w, make_word(with_phase(s, kIdle), refs_of(w)),
                                        std::memory_order_acq_rel)) {
          return true;
        }
        break;
      default: {  // kScheduled: only the holder of its base's lock may unlink it.
        const std::uintptr_t place = place_.load(std::memory_order_acquire);
        if ((place & kRetired) != 0) {
          // An add() took it a few instructions ago and is storing its base, under that base's
          // lock: look again.
          PURGATORY_RACE_POINT("TimerTask::cancel: scheduled, its base not stored yet");
          std::this_thread::yield();
          w = word_.load(std::memory_order_acquire);
          break;
        }
        // Not retired: a bucket (no tag bits) or a tagged base, never null.
        detail::TimerBase* base =
            (place & kBaseTag) != 0 ? reinterpret_cast<detail::TimerBase*>(place & ~kPlaceBits)
                                    : reinterpret_cast<const detail::TimerTaskList*>(place)->base_;
        PURGATORY_RACE_POINT("TimerTask::cancel: saw it scheduled, before the timer's lock");
        if (base->owner->cancel_scheduled(*this, *base, place)) return true;
        w = word_.load(std::memory_order_acquire);
        break;
      }
    }
  }
}

}  // namespace purgatory
