// TimerTaskList: one bucket of a timing wheel, an intrusive doubly-linked list of tasks.
//
// Adding a task that already sits in another list moves it (Kafka's rule: a task is in at most one
// bucket, so re-adding never makes it run twice). Every list of one wheel shares a counter, so the
// wheel knows how many tasks it holds without walking the buckets.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <boost/intrusive/list.hpp>

#include "purgatory/timer/timer_task.hpp"

namespace purgatory {

// Thread-compatible: the owner (SystemTimer, under its mutex) serializes every call.
class TimerTaskList {
 public:
  static constexpr std::int64_t kNoExpiration = std::numeric_limits<std::int64_t>::min();

  // `shared_counter` (may be null) is incremented and decremented with this list's size.
  explicit TimerTaskList(std::size_t* shared_counter = nullptr) noexcept
      : counter_(shared_counter) {}
  TimerTaskList(const TimerTaskList&) = delete;
  TimerTaskList& operator=(const TimerTaskList&) = delete;
  ~TimerTaskList() { assert(tasks_.empty() && "a bucket must be empty when destroyed"); }

  // Appends `task`; if it is in another list (or this one) it is removed from there first.
  void add(TimerTask& task) noexcept {
    if (task.list_ != nullptr) task.list_->remove(task);
    tasks_.push_back(task);
    task.list_ = this;
    ++size_;
    if (counter_ != nullptr) ++*counter_;
  }

  // Unlinks `task`, which must be in this list. O(1).
  void remove(TimerTask& task) noexcept {
    assert(task.list_ == this);
    tasks_.erase(List::s_iterator_to(task));
    task.list_ = nullptr;
    --size_;
    if (counter_ != nullptr) --*counter_;
  }

  // Removes every task, front to back, calling fn(TimerTask&) on each after it is unlinked.
  // fn may add the task to any list, including this one.
  template <class F>
  void flush(F&& fn) {
    expiration_ = kNoExpiration;
    while (!tasks_.empty()) {
      TimerTask& task = tasks_.front();
      remove(task);
      fn(task);
    }
  }

  template <class F>
  void for_each(F&& fn) const {
    for (const TimerTask& t : tasks_)
      fn(t);
  }

  template <class F>
  void for_each_mutable(F&& fn) {
    for (TimerTask& t : tasks_)
      fn(t);
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
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
  using List = boost::intrusive::list<
      TimerTask, boost::intrusive::member_hook<TimerTask, TimerTask::Hook, &TimerTask::hook_>,
      boost::intrusive::constant_time_size<false>>;

  friend class TimingWheel;

  List tasks_;
  std::size_t size_ = 0;
  TimingWheel* wheel_ = nullptr;  // the wheel level owning this bucket, if any
  int slot_ = 0;                  // index of this bucket in wheel_
  std::size_t* counter_;
  std::int64_t expiration_ = kNoExpiration;
};

}  // namespace purgatory
