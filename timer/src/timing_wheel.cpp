#include "timing_wheel.hpp"

#include <bit>
#include <cassert>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "platform/checked_math.hpp"

namespace purgatory::detail {
namespace {

constexpr std::int64_t kMaxTime = std::numeric_limits<std::int64_t>::max();

std::int64_t saturating_mul(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  return platform::multiply_checked(a, b, r) ? r : kMaxTime;
}

}  // namespace

TimingWheel::TimingWheel(std::int64_t tick, int wheel_size, std::int64_t start_time, bool overflow)
    : tick_(tick), wheel_size_(wheel_size) {
  if (tick <= 0)
    throw std::invalid_argument(fmt::format("TimingWheel: tick must be > 0, got {}", tick));
  if (wheel_size < 2 || wheel_size > kMaxWheelSize) {
    throw std::invalid_argument(fmt::format("TimingWheel: wheel_size must be in [2, {}], got {}",
                                            kMaxWheelSize, wheel_size));
  }
  if (start_time < 0) {
    throw std::invalid_argument(
        fmt::format("TimingWheel: start_time must be >= 0, got {}", start_time));
  }
  ring_ = 2 * wheel_size;
  interval_ = saturating_mul(tick, wheel_size);
  current_time_ = start_time - start_time % tick;
  reach_ = interval_ - tick_;
  const auto n = static_cast<std::size_t>(ring_);
  if (overflow) {
    settled_lists_ = std::make_unique<TimerTaskList::List[]>(n * TimerTaskList::kSettledStripes);
  }
  buckets_ = std::make_unique<TimerTaskList[]>(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (overflow) buckets_[i].settled_ = &settled_lists_[i * TimerTaskList::kSettledStripes];
    buckets_[i].counter_ = &level_count_;
    buckets_[i].wheel_ = this;
    buckets_[i].slot_ = static_cast<int>(i);
  }
  nonempty_.assign((n + 63) / 64, 0);
}

TimingWheel::~TimingWheel() {
  for (int i = 0; i < ring_; ++i) {
    buckets_[static_cast<std::size_t>(i)].flush([](TimerTask&) {});
  }
}

bool TimingWheel::add(TimerTask& task, std::int64_t expiration) {
  assert(expiration >= 0);
  if (expiration < current_time_ + tick_) return false;  // due now: the caller runs it
  // expiration > current_time_ here, so the difference cannot overflow.
  if (expiration - current_time_ < interval_) return place(task, expiration);
  if (!overflow_) reserve_overflow(expiration);
  return overflow_->add(task, expiration);
}

void TimingWheel::reserve_overflow(std::int64_t expiration) {
  // The levels add() walks: it stops at the first whose interval holds the expiration. A new
  // level's tick is the interval of the level below (below kMaxTime here: a saturated interval
  // holds every expiration), and its buckets name the same base.
  for (TimingWheel* w = this; expiration - w->current_time_ >= w->interval_;
       w = w->overflow_.get()) {
    if (!w->overflow_) {
      w->overflow_ = std::make_unique<TimingWheel>(w->interval_, w->wheel_size_, w->current_time_,
                                                   /*overflow=*/true);
      w->overflow_->attach(w->base_);
    }
  }
  const TimingWheel* top = this;
  while (top->overflow_)
    top = top->overflow_.get();
  reach_ = top->interval_ - top->tick_;
}

bool TimingWheel::place(TimerTask& task, std::int64_t expiration) noexcept {
  if (expiration < current_time_ + tick_) return false;
  const std::int64_t virtual_id = expiration / tick_;
  assert(virtual_id < current_time_ / tick_ + ring_);
  const int slot = slot_of(virtual_id);
  TimerTaskList& bucket = buckets_[static_cast<std::size_t>(slot)];
  task.expiration_ = expiration;
  bucket.set_expiration(virtual_id * tick_);
  // Due at the bucket's start, on an overflow level: it runs when this bucket comes due, and the
  // ahead-of-time cascade leaves it here (timer_task_list.hpp, "Settled tasks").
  if (bucket.settled_ != nullptr && expiration == virtual_id * tick_) {
    bucket.add_settled(task);
  } else {
    bucket.add(task);
  }
  set_bit(slot);
  return true;
}

std::optional<TimingWheel::AheadWork> TimingWheel::ahead_work(int level) const noexcept {
  const TimingWheel* finer = this;
  for (int i = 1; i < level && finer != nullptr; ++i)
    finer = finer->overflow_.get();
  if (finer == nullptr || finer->overflow_ == nullptr) return std::nullopt;
  const TimingWheel& coarse = *finer->overflow_;
  if (coarse.level_count_ == 0) return std::nullopt;
  const std::int64_t next_id = coarse.current_time_ / coarse.tick_ + 1;
  const TimerTaskList& bucket = coarse.buckets_[static_cast<std::size_t>(coarse.slot_of(next_id))];
  if (bucket.regular_size() == 0) return std::nullopt;  // settled tasks stay where they are
  return AheadWork{saturating_mul(next_id, coarse.tick_), bucket.regular_size(), finer->tick_,
                   coarse.tick_};
}

void TimingWheel::remove(TimerTask& task) noexcept {
  TimerTaskList* bucket = task.bucket();
  assert(task.hook_.is_linked() && bucket->wheel_ != nullptr);
  bucket->remove(task);
  if (bucket->empty()) bucket->wheel_->clear_bit(bucket->slot_);
}

void TimingWheel::advance_clock(std::int64_t time) noexcept {
  for (TimingWheel* w = this; w != nullptr; w = w->overflow_.get()) {
    if (time < w->current_time_ + w->tick_) break;  // coarser levels cannot move either
    w->current_time_ = time - time % w->tick_;
  }
}

std::size_t TimingWheel::size() const noexcept {
  std::size_t n = 0;
  for (const TimingWheel* w = this; w != nullptr; w = w->overflow_.get())
    n += w->level_count_;
  return n;
}

std::size_t TimingWheel::memory_bytes() const noexcept {
  std::size_t n = 0;
  for (const TimingWheel* w = this; w != nullptr; w = w->overflow_.get()) {
    n += sizeof(TimingWheel) + static_cast<std::size_t>(w->ring_) * sizeof(TimerTaskList) +
         w->nonempty_.capacity() * sizeof(std::uint64_t);
    if (w->settled_lists_) {
      n += static_cast<std::size_t>(w->ring_) * TimerTaskList::kSettledStripes *
           sizeof(TimerTaskList::List);
    }
  }
  return n;
}

int TimingWheel::levels() const noexcept {
  int n = 0;
  for (const TimingWheel* w = this; w != nullptr; w = w->overflow_.get())
    ++n;
  return n;
}

std::optional<std::int64_t> TimingWheel::next_expiration() const noexcept {
  const auto next = find_next();
  if (!next) return std::nullopt;
  return next->expiration;
}

std::optional<TimingWheel::Next> TimingWheel::find_next() const noexcept {
  std::optional<Next> best;
  for (const TimingWheel* w = this; w != nullptr; w = w->overflow_.get()) {
    if (w->level_count_ == 0) continue;
    const std::int64_t current_id = w->current_time_ / w->tick_;
    const int from = w->slot_of(current_id);
    const int d = w->distance_to_next_set(from);
    assert(d >= 0);
    // A bucket of a coarser level may tie with a finer one (both due at the same instant); the
    // finer level is visited first and wins the tie, which is the order the cascade needs.
    const std::int64_t expiration = saturating_mul(current_id + d, w->tick_);
    if (!best || expiration < best->expiration) {
      best = Next{const_cast<TimingWheel*>(w), (from + d) % w->ring_, expiration};
    }
  }
  return best;
}

int TimingWheel::distance_to_next_set(int from) const noexcept {
  const int n = ring_;
  const int words = static_cast<int>(nonempty_.size());
  // Scan [from, n) then [0, from), a word at a time.
  int word = from / 64;
  std::uint64_t bits =
      nonempty_[static_cast<std::size_t>(word)] & (~std::uint64_t{0} << (from % 64));
  for (int scanned = 0; scanned <= words; ++scanned) {
    if (bits != 0) {
      const int slot = word * 64 + std::countr_zero(bits);
      return slot >= from ? slot - from : slot + n - from;
    }
    word = (word + 1) % words;
    bits = nonempty_[static_cast<std::size_t>(word)];
  }
  return -1;
}

void TimingWheel::attach(TimerBase* base) noexcept {
  base_ = base;
  for (int i = 0; i < ring_; ++i)
    buckets_[static_cast<std::size_t>(i)].base_ = base;
}

void TimingWheel::set_bit(int slot) noexcept {
  nonempty_[static_cast<std::size_t>(slot / 64)] |= std::uint64_t{1} << (slot % 64);
}

void TimingWheel::clear_bit(int slot) noexcept {
  nonempty_[static_cast<std::size_t>(slot / 64)] &= ~(std::uint64_t{1} << (slot % 64));
}

}  // namespace purgatory::detail
