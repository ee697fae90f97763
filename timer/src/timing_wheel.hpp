// Internal to SystemTimer; not for users.
//
// TimingWheel: Kafka's hierarchical timing wheel, with an O(1) "which bucket is next" answer.
//
// A wheel of `wheel_size` buckets, each `tick` wide, covers `tick * wheel_size` (its interval)
// ahead of its current time. A task further out goes to an overflow wheel whose tick is this
// wheel's interval; overflow wheels are created on first use, so a timer holding only short
// timeouts has one level. When the clock reaches an overflow bucket, its tasks are re-added and
// fall into finer levels until they expire from level 0 (the cascade); one due at the bucket's
// very start is kept apart (settled, timer_task_list.hpp) and expires from that bucket.
//
// Kafka finds the next due bucket with a DelayQueue of buckets (O(log buckets) per new bucket and
// a reaper polling every 200 ms). Here every level keeps a bitmap of its non-empty buckets: the
// next due bucket of a level is a find-first-set from the current slot, and of the whole wheel the
// minimum over its few levels. The clock can therefore jump straight to the next non-empty bucket,
// and an idle timer has nothing to poll.
//
// Times are plain integers in the caller's unit (SystemTimer uses nanoseconds). A task is due at
// its `expiration`; this class places it in the bucket that starts at or before it (like Kafka):
// SystemTimer rounds deadlines up to a tick boundary first, which is what makes it never early.
//
// Cascading ahead of time. Kafka cascades an overflow bucket when it comes due, in one go: a burst
// of a million timeouts puts hundreds of thousands of tasks in one coarse bucket, and every task
// due at that instant waits while they are all moved (tens of milliseconds). Here each level keeps
// a ring of 2 * wheel_size buckets, though add() still places a task on the lowest level whose
// interval (wheel_size ticks) holds it, exactly as Kafka does. The second half of the ring is room
// for the *next* bucket of the level above: during the whole coarse tick before that bucket is
// due, cascade_ahead() moves its tasks down a slice at a time, so that it is empty when it comes
// due. The caller (SystemTimer's driver) paces the slices and expires due tasks between them.
// Anything not moved in time is cascaded when due, as in Kafka, so correctness never depends on
// the pacing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "purgatory/timer/export.hpp"
#include "purgatory/timer/timer_task.hpp"
#include "timer_task_list.hpp"

namespace purgatory::detail {

// Kafka's hierarchical timing wheel, with a bitmap of non-empty buckets per level.
// Thread-compatible: SystemTimer serializes every call under its mutex.
class PURGATORY_TIMER_EXPORT TimingWheel {
 public:
  // The largest wheel_size a level may have.
  static constexpr int kMaxWheelSize = 1 << 16;

  // Throws std::invalid_argument (naming the value) for tick <= 0, wheel_size outside
  // [2, kMaxWheelSize], or start_time < 0. `overflow`: an overflow level, whose buckets also keep
  // settled tasks (timer_task_list.hpp).
  TimingWheel(std::int64_t tick, int wheel_size, std::int64_t start_time, bool overflow = false);
  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;
  // Unlinks any task still held (the owner hands them back first; this is a safety net).
  ~TimingWheel();

  // Places `task`, whose expiration_ is set, in a bucket of this wheel or an overflow wheel and
  // returns true. Returns false, leaving the task untouched, when it is already due
  // (expiration < current_time() + tick()): the caller runs it.
  bool add(TimerTask& task, std::int64_t expiration);

  // Creates the overflow levels an add() for `expiration` would create, the only memory add()
  // ever allocates: an add() for it afterwards cannot throw. Throws std::bad_alloc (and then has
  // changed nothing).
  void reserve_levels(std::int64_t expiration) {
    if (expiration - current_time_ >= reach_) reserve_overflow(expiration);
  }

  // Unlinks `task`, which must be held by this wheel or one of its overflow wheels. O(1).
  static void remove(TimerTask& task) noexcept;

  // Moves the current time of this wheel and every overflow wheel to `time`, rounded down to each
  // level's tick. Precondition: no non-empty bucket is due before `time` (expire_next() first).
  void advance_clock(std::int64_t time) noexcept;

  // Expiration of the earliest non-empty bucket over all levels, if any task is held.
  [[nodiscard]] std::optional<std::int64_t> next_expiration() const noexcept;

  // If the earliest non-empty bucket is due at or before `time`: advances the clock to its
  // expiration, unlinks its tasks and calls fn(TimerTask&) on each (fn typically re-adds them,
  // which cascades them down or reports them due), and returns true. Otherwise returns false.
  template <class F>
  bool expire_next(std::int64_t time, F&& fn) {
    const auto next = find_next();
    if (!next || next->expiration > time) return false;
    advance_clock(next->expiration);
    TimerTaskList& bucket = next->level->buckets_[static_cast<std::size_t>(next->slot)];
    next->level->clear_bit(next->slot);
    bucket.flush(fn);
    return true;
  }

  // Takes out, bucket after bucket in time order, every task due at or before `time`, calling
  // fn(TimerTask&) on each; fn returns false to stop early (the rest stays in its bucket for the
  // next call). Returns true when everything due was taken, and then the clock is at `time`.
  template <class F>
  bool expire_due(std::int64_t time, F&& fn) {
    for (;;) {
      const auto next = find_next();
      if (!next || next->expiration > time) {
        advance_clock(time);
        return true;
      }
      advance_clock(next->expiration);
      TimingWheel& level = *next->level;
      TimerTaskList& bucket = level.buckets_[static_cast<std::size_t>(next->slot)];
      while (TimerTask* task = bucket.pop()) {
        if (bucket.empty()) level.clear_bit(next->slot);
        if (!fn(*task)) return false;
      }
    }
  }

  // Unlinks every task of every level, calling fn(TimerTask&) on each (used by close()).
  template <class F>
  void drain(F&& fn) {
    for (TimingWheel* w = this; w != nullptr; w = w->overflow_.get()) {
      for (int i = 0; i < w->ring_; ++i)
        w->buckets_[static_cast<std::size_t>(i)].flush(fn);
      std::fill(w->nonempty_.begin(), w->nonempty_.end(), 0);
    }
  }

  // What ahead_work() reports of the next bucket of a level.
  struct AheadWork {
    std::int64_t due;         ///< when the bucket comes due
    std::size_t tasks;        ///< how many tasks it holds
    std::int64_t finer_tick;  ///< the tick of the level below: the pace at which SystemTimer steps
    std::int64_t tick;        ///< of level `level`: the bucket's window is [due - tick, due)
  };
  // The next bucket of level `level` (1: the first overflow wheel), which cascade_ahead() drains.
  // Empty when that level does not exist or its next bucket is empty.
  [[nodiscard]] std::optional<AheadWork> ahead_work(int level) const noexcept;

  // Moves up to `budget` tasks out of the next bucket of level `level` (>= 1) into the level
  // below, ahead of time; settled ones (due at the bucket's start) stay, to run from it. A task
  // already due (the caller fell behind) goes to due(TimerTask&) instead. Returns how many tasks it
  // took out.
  template <class F>
  std::size_t cascade_ahead(int level, std::size_t budget, F&& due) {
    TimingWheel* finer = this;
    for (int i = 1; i < level && finer != nullptr; ++i)
      finer = finer->overflow_.get();
    if (finer == nullptr || finer->overflow_ == nullptr) return 0;
    TimingWheel& coarse = *finer->overflow_;
    const int slot = coarse.slot_of(coarse.current_time_ / coarse.tick_ + 1);
    TimerTaskList& bucket = coarse.buckets_[static_cast<std::size_t>(slot)];
    std::size_t moved = 0;
    while (moved < budget) {
      TimerTask* task = bucket.pop_regular();  // settled tasks wait for the bucket's due time
      if (task == nullptr) break;
      ++moved;
      if (!finer->place(*task, task->expiration_)) due(*task);
    }
    if (bucket.empty()) coarse.clear_bit(slot);
    return moved;
  }

  // Calls fn(TimerTask&) on every task held, without unlinking any.
  template <class F>
  void for_each_task(F&& fn) {
    for (TimingWheel* w = this; w != nullptr; w = w->overflow_.get()) {
      for (int i = 0; i < w->ring_; ++i) {
        w->buckets_[static_cast<std::size_t>(i)].for_each_mutable(fn);
      }
    }
  }

  // The wheel time at which `task` is due (meaningful while it is held by a wheel).
  [[nodiscard]] static std::int64_t expiration_of(const TimerTask& task) noexcept {
    return task.expiration_;
  }

  // The width of one bucket of this level.
  [[nodiscard]] std::int64_t tick() const noexcept { return tick_; }
  // Buckets per level (the span a level covers is wheel_size() ticks).
  [[nodiscard]] int wheel_size() const noexcept { return wheel_size_; }
  // tick() * wheel_size(): the span this level covers ahead of its current time.
  [[nodiscard]] std::int64_t interval() const noexcept { return interval_; }
  // This level's current time, a multiple of its tick.
  [[nodiscard]] std::int64_t current_time() const noexcept { return current_time_; }
  // The next coarser level, or null if none was needed yet.
  [[nodiscard]] const TimingWheel* overflow_wheel() const noexcept { return overflow_.get(); }

  // Tasks held by this level alone.
  [[nodiscard]] std::size_t level_size() const noexcept { return level_count_; }
  // Tasks held by this level plus all overflow levels.
  [[nodiscard]] std::size_t size() const noexcept;
  // Bytes of bookkeeping held by this level and its overflow levels (buckets, bitmaps), which is
  // what the wheel costs beyond the tasks themselves.
  [[nodiscard]] std::size_t memory_bytes() const noexcept;
  // Number of levels in use (1 + overflow wheels created so far).
  [[nodiscard]] int levels() const noexcept;

  // Tasks in the bucket `k` ticks after the one holding current_time() (k in [0, wheel_size)).
  [[nodiscard]] std::size_t bucket_size_ahead(int k) const noexcept {
    return bucket_size_at(current_time_ / tick_ + k);
  }
  // Tasks in bucket number `id` (its start time / tick) of this level: 0 outside the buckets the
  // level holds now (before its current one, or past the ring).
  [[nodiscard]] std::size_t bucket_size_at(std::int64_t id) const noexcept {
    const std::int64_t current = current_time_ / tick_;
    if (id < current || id - current >= ring_) return 0;
    return buckets_[static_cast<std::size_t>(slot_of(id))].size();
  }

 private:
  friend struct TimerBase;

  struct Next {
    TimingWheel* level;
    int slot;
    std::int64_t expiration;
  };

  [[nodiscard]] std::optional<Next> find_next() const noexcept;
  void reserve_overflow(std::int64_t expiration);
  // Ring slot of bucket number `id` (expiration / tick).
  [[nodiscard]] int slot_of(std::int64_t id) const noexcept { return static_cast<int>(id % ring_); }
  // Links `task` on this level (not an overflow level), in the ring's second half if need be;
  // false when it is already due. Precondition: expiration / tick < current id + 2 * wheel_size.
  bool place(TimerTask& task, std::int64_t expiration) noexcept;
  // Distance (0..wheel_size-1) from `from` to the first non-empty slot, or -1.
  [[nodiscard]] int distance_to_next_set(int from) const noexcept;
  void set_bit(int slot) noexcept;
  void clear_bit(int slot) noexcept;
  // Names the timer base owning this wheel in its buckets and in its overflow levels' (done
  // before any task is added).
  void attach(TimerBase* base) noexcept;

  std::int64_t tick_;
  int wheel_size_;
  int ring_;               // buckets in the ring: 2 * wheel_size (see the top)
  std::int64_t interval_;  // tick * wheel_size, saturated at INT64_MAX for the top level
  std::int64_t current_time_;
  std::size_t level_count_ = 0;
  // The settled lists of the buckets (an overflow level's), before buckets_ so that the buckets,
  // which point into it, are destroyed first.
  std::unique_ptr<TimerTaskList::List[]> settled_lists_;
  std::unique_ptr<TimerTaskList[]> buckets_;
  std::vector<std::uint64_t> nonempty_;  // bit i set <=> buckets_[i] non-empty (ring_ bits)
  std::unique_ptr<TimingWheel> overflow_;
  TimerBase* base_ = nullptr;  // see attach()
  // reserve_levels()'s test, one comparison on the add path: an expiration less than reach_ after
  // current_time_ needs no new level. It is the top level's interval minus its tick, set by
  // reserve_overflow(): a level's current time is this one's rounded down to its tick, so it lags
  // by less than that tick. Levels are never removed, so it is never too large; one made by an
  // add() on a coarser level leaves it small until the next reserve_overflow() here.
  std::int64_t reach_;
};

}  // namespace purgatory::detail
