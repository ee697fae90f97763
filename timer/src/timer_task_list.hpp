// Internal to SystemTimer; not for users.
//
// TimerTaskList: one bucket of a timing wheel, holding its tasks in intrusive doubly-linked lists.
//
// Adding a task that already sits in another list moves it (Kafka's rule: a task is in at most one
// bucket, so re-adding never makes it run twice). Every list of one wheel shares a counter, so the
// wheel knows how many tasks it holds without walking the buckets.
//
// Why striped: expiring a bucket walks its tasks, and tasks live wherever the allocator put them,
// so each step of one linked list is a cache miss that cannot start before the previous one ends.
// A bucket therefore spreads its tasks round-robin over kStripes lists and pop() takes from them
// in turn, prefetching each list's next task: up to kStripes misses are in flight at once. The
// order within a bucket (all due at the same tick) is not preserved, nor needed.
//
// Settled tasks. A bucket of an overflow level spans many finer ticks; a task due at its very
// start needs no finer bucket: it can run when this one comes due. The wheel links such a task
// as *settled* (add_settled()), in a second set of kSettledStripes lists that pop_regular() (the
// ahead-of-time cascade) leaves alone, so it is never moved down; pop() and flush() take both.
// Only an overflow level's buckets have that set (their level allocates it: level 0's buckets
// stay as small as they were). Which set holds a task follows from the task alone: settled
// exactly when the bucket has the set and the task's expiration is the bucket's expiration,
// which is how the wheel chose.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <boost/intrusive/list.hpp>

#include "purgatory/timer/detail/platform.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory::detail {

// One bucket of a timing wheel: its tasks, striped over intrusive lists.
// Thread-compatible: the owner (SystemTimer, under its mutex) serializes every call.
class TimerTaskList {
 public:
  // The expiration() of a bucket not in use.
  static constexpr std::int64_t kNoExpiration = std::numeric_limits<std::int64_t>::min();
  // Lists a bucket spreads its tasks over (see the file's overview).
  static constexpr unsigned kStripes = 8;
  // Lists of settled tasks a bucket of an overflow level spreads them over.
  static constexpr unsigned kSettledStripes = 4;

  // `shared_counter` (may be null) is incremented and decremented with this list's size.
  explicit TimerTaskList(std::size_t* shared_counter = nullptr) noexcept
      : counter_(shared_counter) {}
  TimerTaskList(const TimerTaskList&) = delete;
  TimerTaskList& operator=(const TimerTaskList&) = delete;
  ~TimerTaskList() { assert(size_ == 0 && "a bucket must be empty when destroyed"); }

  // Appends `task`; if it is in another list (or this one) it is removed from there first.
  void add(TimerTask& task) noexcept { link(task, stripes_, kStripes); }
  // As add(), as settled: a task of an overflow level's bucket due at the bucket's expiration
  // (set_expiration() first), which pop_regular() does not take.
  void add_settled(TimerTask& task) noexcept {
    assert(settled_ != nullptr && task.expiration_ == expiration_);
    link(task, settled_, kSettledStripes);
    ++settled_size_;
  }

  // Unlinks `task`, which must be in this list. O(1). The task's place still names this list
  // (the timer that last held it) until it is added again.
  void remove(TimerTask& task) noexcept {
    assert(task.hook_.is_linked() && task.bucket() == this);
    if (settled_size_ != 0 && is_settled(task)) --settled_size_;
    task.hook_.unlink();
    --size_;
    if (counter_ != nullptr) --*counter_;
  }

  // Unlinks and returns one task, or null when empty: the regular ones first, then the settled.
  // Successive calls take from each stripe in turn and prefetch the stripe's next task, so a walk
  // over a large bucket overlaps its misses.
  TimerTask* pop() noexcept {
    if (TimerTask* task = pop_regular()) return task;
    if (settled_size_ == 0) return nullptr;
    --settled_size_;
    return pop_from(settled_, kSettledStripes);
  }
  // As pop(), taking regular tasks only (the ahead-of-time cascade: settled ones stay).
  TimerTask* pop_regular() noexcept {
    if (size_ == settled_size_) return nullptr;
    return pop_from(stripes_, kStripes);
  }

 private:
  using List = boost::intrusive::list<
      TimerTask, boost::intrusive::member_hook<TimerTask, TimerTask::Hook, &TimerTask::hook_>,
      boost::intrusive::constant_time_size<false>>;

  [[nodiscard]] bool is_settled(const TimerTask& task) const noexcept {
    return settled_ != nullptr && task.expiration_ == expiration_;
  }
  void link(TimerTask& task, List* stripes, unsigned count) noexcept {
    if (task.hook_.is_linked()) task.bucket()->remove(task);
    stripes[next_stripe_++ % count].push_back(task);
    // Release: a cancel() that reads the place without the lock finds this list's base set.
    task.place_.store(reinterpret_cast<std::uintptr_t>(this), std::memory_order_release);
    ++size_;
    if (counter_ != nullptr) ++*counter_;
  }
  // One task of `stripes`, which holds at least one.
  TimerTask* pop_from(List* stripes, unsigned count) noexcept {
    for (unsigned i = 0; i < count; ++i) {
      List& stripe = stripes[pop_stripe_++ % count];
      if (stripe.empty()) continue;
      TimerTask& task = stripe.front();
      stripe.pop_front();
      if (!stripe.empty()) prefetch_for_write(&stripe.front());
      --size_;
      if (counter_ != nullptr) --*counter_;
      return &task;
    }
    assert(false && "size_ disagrees with the stripes");
    return nullptr;
  }

 public:
  // Removes every task, calling fn(TimerTask&) on each after it is unlinked. fn may add the task
  // to any list, except this one (it would be popped again).
  template <class F>
  void flush(F&& fn) {
    expiration_ = kNoExpiration;
    while (TimerTask* task = pop())
      fn(*task);
  }

  // Calls fn(const TimerTask&) on every task, in no particular order, unlinking none.
  template <class F>
  void for_each(F&& fn) const {
    for (const List& stripe : stripes_) {
      for (const TimerTask& t : stripe)
        fn(t);
    }
    for (unsigned i = 0; settled_ != nullptr && i < kSettledStripes; ++i) {
      for (const TimerTask& t : settled_[i])
        fn(t);
    }
  }
  // As for_each(), with fn(TimerTask&); fn must not add or remove tasks of this list.
  template <class F>
  void for_each_mutable(F&& fn) {
    for (List& stripe : stripes_) {
      for (TimerTask& t : stripe)
        fn(t);
    }
    for (unsigned i = 0; settled_ != nullptr && i < kSettledStripes; ++i) {
      for (TimerTask& t : settled_[i])
        fn(t);
    }
  }

  // Tasks in the list.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // Whether the list holds no task.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  // Tasks pop_regular() would take (size() less the settled ones).
  [[nodiscard]] std::size_t regular_size() const noexcept { return size_ - settled_size_; }

  // The wheel time at which this bucket is due (kNoExpiration when unused).
  [[nodiscard]] std::int64_t expiration() const noexcept { return expiration_; }
  // Returns true when the value changed (the bucket was reused for a new round).
  bool set_expiration(std::int64_t e) noexcept {
    const bool changed = expiration_ != e;
    assert((!changed || settled_size_ == 0) && "settled tasks are due at the bucket's expiration");
    expiration_ = e;
    return changed;
  }

 private:
  friend class TimingWheel;
  friend struct TimerBase;  // its list of due tasks names the base, as a wheel's buckets do
  friend class purgatory::TimerTask;  // a task's place names its bucket, whose base_ it reads

  List stripes_[kStripes];
  unsigned next_stripe_ = 0;
  unsigned pop_stripe_ = 0;
  std::size_t size_ = 0;  // every task, settled ones included
  std::size_t* counter_;
  std::int64_t expiration_ = kNoExpiration;
  TimingWheel* wheel_ = nullptr;  // the wheel level owning this bucket, if any
  // The timer base of that wheel (null outside a SystemTimer): what a task's place names.
  TimerBase* base_ = nullptr;
  int slot_ = 0;  // index of this bucket in wheel_
  // Of size_, the settled tasks (in settled_); in slot_'s padding, so that the fields every add
  // and cancel touch keep their places. Fewer than 2^32: each is a task in memory.
  std::uint32_t settled_size_ = 0;
  // kSettledStripes lists of settled tasks, owned by the level (an overflow level's buckets
  // only; null elsewhere).
  List* settled_ = nullptr;
};

}  // namespace purgatory::detail
