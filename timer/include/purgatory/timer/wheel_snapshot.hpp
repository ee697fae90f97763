/// @file
/// WheelSnapshot: what a SystemTimer's hierarchical wheel holds right now, level by level, for
/// live views and diagnostics (SystemTimer::wheel_snapshot()).
///
/// Each level is a ring of `wheel_size` buckets, each `tick` wide; its buckets are listed in time
/// order starting from the bucket that holds the level's current time, so bucket k covers
/// [start + k * tick, start + (k + 1) * tick). Watching successive snapshots shows tasks moving
/// towards bucket 0 of level 0 and, when a coarser bucket comes due, its tasks cascading into the
/// finer levels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "purgatory/timer/clock.hpp"

namespace purgatory {

/// What SystemTimer::wheel_snapshot() reports. A plain value, thread-compatible.
struct WheelSnapshot {
  /// One level of the wheel, every base summed.
  struct Level {
    Nanos tick{0};          ///< width of one bucket
    Nanos interval{0};      ///< tick * wheel_size: the span the level covers
    Nanos current_time{0};  ///< the level's current time (rounded down to its tick)
    std::size_t tasks = 0;  ///< tasks held by this level
    /// Tasks per bucket in time order from the current one; empty for levels past the
    /// `max_levels_with_buckets` asked for (their `tasks` is still exact).
    std::vector<std::size_t> buckets;
    /// With buckets: tasks this level holds past its span, moved down early from the next coarser
    /// level's bucket as it comes due (its ahead-of-time cascade), so that
    /// sum(buckets) + ahead == tasks.
    std::size_t ahead = 0;
  };

  Nanos now{0};           ///< clock().now() when the snapshot was taken
  Nanos wheel_time{0};    ///< level 0's current time
  std::size_t tasks = 0;  ///< tasks in the wheel, every level (== SystemTimer::size())
  std::optional<Nanos> next_expiration;  ///< when the earliest non-empty bucket is due
  std::vector<Level> levels;             ///< finest first; only the levels created so far
};

}  // namespace purgatory
