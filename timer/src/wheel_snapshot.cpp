// SystemTimer::wheel_snapshot(): kept apart from system_timer.cpp, which it only reads.
#include "purgatory/timer/wheel_snapshot.hpp"

#include <algorithm>
#include <mutex>

#include "purgatory/timer/system_timer.hpp"

namespace purgatory {

WheelSnapshot SystemTimer::wheel_snapshot(int max_levels_with_buckets) const {
  // Allocate before taking the lock: wheel_size() never changes after construction, and every
  // level has the same number of buckets. Levels past those asked for cost no allocation.
  const auto wheel_size = static_cast<std::size_t>(wheel_.wheel_size());
  const auto with_buckets = static_cast<std::size_t>(std::clamp(max_levels_with_buckets, 0, 64));
  WheelSnapshot snap;
  snap.levels.resize(64);  // intervals grow at least 2x per level: at most 64 levels
  for (std::size_t i = 0; i < with_buckets; ++i)
    snap.levels[i].buckets.resize(wheel_size);

  std::size_t used = 0;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    snap.now = clock_->now();
    snap.wheel_time = Nanos{wheel_.current_time()};
    snap.tasks = pending_;
    if (const auto next = wheel_.next_expiration()) snap.next_expiration = Nanos{*next};
    for (const TimingWheel* w = &wheel_; w != nullptr && used < snap.levels.size();
         w = w->overflow_wheel(), ++used) {
      WheelSnapshot::Level& level = snap.levels[used];
      level.tick = Nanos{w->tick()};
      level.interval = Nanos{w->interval()};
      level.current_time = Nanos{w->current_time()};
      level.tasks = w->level_size();
      for (std::size_t k = 0; k < level.buckets.size(); ++k) {
        level.buckets[k] = w->bucket_size_ahead(static_cast<int>(k));
      }
    }
  }
  snap.levels.resize(used);
  return snap;
}

}  // namespace purgatory
