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

  // `shared_counter` (may be null) is incremented and decremented with this list's size.
  explicit TimerTaskList(std::size_t* shared_counter = nullptr) noexcept
      : counter_(shared_counter) {}
  TimerTaskList(const TimerTaskList&) = delete;
  TimerTaskList& operator=(const TimerTaskList&) = delete;
  ~TimerTaskList() { assert(size_ == 0 && "a bucket must be empty when destroyed"); }

  // Appends `task`; if it is in another list (or this one) it is removed from there first.
  void add(TimerTask& task) noexcept {
    if (task.hook_.is_linked()) task.bucket()->remove(task);
    stripes_[next_stripe_++ % kStripes].push_back(task);
    // Release: a cancel() that reads the place without the lock finds this list's base set.
    task.place_.store(reinterpret_cast<std::uintptr_t>(this), std::memory_order_release);
    ++size_;
    if (counter_ != nullptr) ++*counter_;
  }

  // Unlinks `task`, which must be in this list. O(1). The task's place still names this list
  // (the timer that last held it) until it is added again.
  void remove(TimerTask& task) noexcept {
    assert(task.hook_.is_linked() && task.bucket() == this);
    task.hook_.unlink();
    --size_;
    if (counter_ != nullptr) --*counter_;
  }

  // Unlinks and returns one task, or null when empty. Successive calls take from each stripe in
  // turn and prefetch the stripe's next task, so a walk over a large bucket overlaps its misses.
  TimerTask* pop() noexcept {
    if (size_ == 0) return nullptr;
    for (unsigned i = 0; i < kStripes; ++i) {
      List& stripe = stripes_[pop_stripe_++ % kStripes];
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
  }
  // As for_each(), with fn(TimerTask&); fn must not add or remove tasks of this list.
  template <class F>
  void for_each_mutable(F&& fn) {
    for (List& stripe : stripes_) {
      for (TimerTask& t : stripe)
        fn(t);
    }
  }

  // Tasks in the list.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // Whether the list holds no task.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

  // The wheel time at which this bucket is due (kNoExpiration when unused).
  [[nodiscard]] std::int64_t expiration() const noexcept { return expiration_; }
  // Returns true when the value changed (the bucket was reused for a new round).
  bool set_expiration(std::int64_t e) noexcept {
    const bool changed = expiration_ != e;
    expiration_ = e;
    return changed;
  }

 private:
  friend class TimingWheel;
  friend struct TimerBase;  // its list of due tasks names the base, as a wheel's buckets do
  friend class purgatory::TimerTask;  // a task's place names its bucket, whose base_ it reads

  using List = boost::intrusive::list<
      TimerTask, boost::intrusive::member_hook<TimerTask, TimerTask::Hook, &TimerTask::hook_>,
      boost::intrusive::constant_time_size<false>>;

  List stripes_[kStripes];
  unsigned next_stripe_ = 0;
  unsigned pop_stripe_ = 0;
  std::size_t size_ = 0;
  std::size_t* counter_;
  std::int64_t expiration_ = kNoExpiration;
  TimingWheel* wheel_ = nullptr;  // the wheel level owning this bucket, if any
  // The timer base of that wheel (null outside a SystemTimer): what a task's place names.
  TimerBase* base_ = nullptr;
  int slot_ = 0;  // index of this bucket in wheel_
};

}  // namespace purgatory::detail
