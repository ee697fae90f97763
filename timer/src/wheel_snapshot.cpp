// SystemTimer::wheel_snapshot(): kept apart from system_timer.cpp, which it only reads.
#include "purgatory/timer/wheel_snapshot.hpp"

#include <algorithm>
#include <mutex>

#include "purgatory/timer/system_timer.hpp"
#include "timer_base.hpp"

namespace purgatory {

WheelSnapshot SystemTimer::wheel_snapshot(int max_levels_with_buckets) const {
  // Allocate before taking any lock: every level of every base has the same number of buckets,
  // fixed at construction. Levels past those asked for cost no allocation.
  const auto wheel_size = static_cast<std::size_t>(bases_.front()->wheel.wheel_size());
  const auto with_buckets = static_cast<std::size_t>(std::clamp(max_levels_with_buckets, 0, 64));
  WheelSnapshot snap;
  snap.levels.resize(64);  // intervals grow at least 2x per level: at most 64 levels
  for (std::size_t i = 0; i < with_buckets; ++i)
    snap.levels[i].buckets.resize(wheel_size);
  snap.now = clock_->now();

  // The bases are summed level by level. Their clocks can differ (each moves when its own wheel
  // is serviced), so buckets are lined up on the latest clock of each level, read first; a base
  // that lags counts its buckets before that instant in bucket 0 (they are due).
  std::vector<std::int64_t> level_time(snap.levels.size(), 0);
  for (const auto& b : bases_) {
    const std::lock_guard<detail::BaseLock> lock(b->mu);
    std::size_t i = 0;
    for (const detail::TimingWheel* w = &b->wheel; w != nullptr && i < level_time.size();
         w = w->overflow_wheel(), ++i) {
      level_time[i] = std::max(level_time[i], w->current_time());
    }
  }
  std::size_t used = 0;
  for (const auto& b : bases_) {
    const std::lock_guard<detail::BaseLock> lock(b->mu);
    snap.tasks += b->pending;
    if (const auto next = b->wheel.next_expiration()) {
      if (!snap.next_expiration || *next < snap.next_expiration->count()) {
        snap.next_expiration = Nanos{*next};
      }
    }
    std::size_t i = 0;
    for (const detail::TimingWheel* w = &b->wheel; w != nullptr && i < snap.levels.size();
         w = w->overflow_wheel(), ++i) {
      WheelSnapshot::Level& level = snap.levels[i];
      level.tick = Nanos{w->tick()};
      level.interval = Nanos{w->interval()};
      // A level created after the first pass: its clock is the base's own.
      const std::int64_t time = std::max(level_time[i], w->current_time());
      level.current_time = Nanos{time};
      level.tasks += w->level_size();
      if (level.buckets.empty()) continue;
      const std::int64_t first = time / w->tick();
      std::size_t counted = 0;
      // The buckets the lagging level holds before that instant: at most its ring (twice
      // wheel_size, see timing_wheel.hpp), however far behind it is.
      const std::int64_t own = w->current_time() / w->tick();
      const std::int64_t held_before = std::min(first, own + 2 * std::int64_t{w->wheel_size()});
      for (std::int64_t id = own; id < held_before; ++id) {
        const std::size_t n = w->bucket_size_at(id);
        level.buckets[0] += n;
        counted += n;
      }
      for (std::size_t k = 0; k < level.buckets.size(); ++k) {
        const std::size_t n = w->bucket_size_at(first + static_cast<std::int64_t>(k));
        level.buckets[k] += n;
        counted += n;
      }
      level.ahead += w->level_size() - counted;
    }
    used = std::max(used, i);
  }
  snap.wheel_time = snap.levels.front().current_time;
  snap.levels.resize(used);
  return snap;
}

}  // namespace purgatory
