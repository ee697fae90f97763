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
// Why a pop leaves the next task's back link stale. Unlinking the front of a doubly-linked list
// writes the back link of the task after it, a line the prefetch above has only just asked for:
// that store waits in the core's store buffer until the line arrives, and with a few such stores
// per pop the buffer, not the prefetches, bounds how many misses are in flight (a quarter of the
// expiry's time with a million tasks pending: docs/performance.md). So pop() writes only the
// list's head and marks the stripe's new front as stale (`stale_`); nothing walks a list
// backwards, and the one operation that reads a task's back link, remove(), first repairs every
// stale front of its bucket (repair_fronts()).
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
  static_assert(kStripes + kSettledStripes <= 16 && 256 % kStripes == 0 &&
                256 % kSettledStripes == 0);

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
    if (stale_ != 0) repair_fronts();
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
    return pop_from(settled_, kSettledStripes, kStripes);
  }
  // As pop(), taking regular tasks only (the ahead-of-time cascade: settled ones stay).
  TimerTask* pop_regular() noexcept {
    if (size_ == settled_size_) return nullptr;
    return pop_from(stripes_, kStripes, 0);
  }

 private:
  using List = boost::intrusive::list<
      TimerTask, boost::intrusive::member_hook<TimerTask, TimerTask::Hook, &TimerTask::hook_>,
      boost::intrusive::constant_time_size<false>>;
  using Links = List::node_traits;

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
  // One task of `stripes`, which holds at least one; `first_bit`: the stripes' first bit in
  // stale_. Unlinks the front writing the head only: the new front's back link is left stale.
  TimerTask* pop_from(List* stripes, unsigned count, unsigned first_bit) noexcept {
    for (unsigned i = 0; i < count; ++i) {
      const unsigned index = pop_stripe_++ % count;
      List& stripe = stripes[index];
      if (stripe.empty()) continue;
      TimerTask& task = stripe.front();
      const auto head = stripe.end().pointed_node();
      const auto node = List::value_traits::to_node_ptr(task);
      const auto next = Links::get_next(node);
      Links::set_next(head, next);
      const auto bit = static_cast<std::uint16_t>(1U << (first_bit + index));
      if (next == head) {  // emptied: the head links to itself both ways
        Links::set_previous(head, head);
        stale_ = static_cast<std::uint16_t>(stale_ & ~bit);
      } else {
        stale_ = static_cast<std::uint16_t>(stale_ | bit);
        prefetch_for_write(&*stripe.begin());
      }
      List::node_algorithms::init(node);  // unlinked, as pop_front() leaves an auto-unlink hook
      --size_;
      if (counter_ != nullptr) --*counter_;
      return &task;
    }
    assert(false && "size_ disagrees with the stripes");
    return nullptr;
  }
  // Restores the back link of every front pop_from() left stale.
  void repair_fronts() noexcept {
    const auto repair = [](List& stripe) {
      if (!stripe.empty())
        Links::set_previous(stripe.begin().pointed_node(), stripe.end().pointed_node());
    };
    for (unsigned i = 0; i < kStripes; ++i) {
      if ((stale_ >> i) & 1U) repair(stripes_[i]);
    }
    for (unsigned i = 0; settled_ != nullptr && i < kSettledStripes; ++i) {
      if ((stale_ >> (kStripes + i)) & 1U) repair(settled_[i]);
    }
    stale_ = 0;
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
  // Round-robin positions; 256 is a multiple of every stripe count, so they may wrap.
  std::uint8_t next_stripe_ = 0;
  std::uint8_t pop_stripe_ = 0;
  // Stripes whose front's back link pop_from() left stale: bit i for stripes_[i], bit kStripes + i
  // for settled_[i].
  std::uint16_t stale_ = 0;
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
