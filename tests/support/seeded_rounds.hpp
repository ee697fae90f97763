// The loop of a seeded race test: rounds, each with its own seed, which a failure names.
#pragma once

#include <cstdint>
#include <type_traits>

#include <doctest/doctest.h>

#include "race_schedule.hpp"

namespace purgatory::test {

// Runs `round` `count` times with the seeds RaceSchedule::seed(0), seed(1), ...: as round(seed),
// or round(i, seed) when it takes the round's index too. A failure names the round's seed (INFO),
// so the run can be replayed.
template <class Round>
void for_each_seed(std::uint64_t count, Round&& round) {
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t seed = RaceSchedule::seed(i);
    INFO("seed " << seed);
    if constexpr (std::is_invocable_v<Round&, std::uint64_t, std::uint64_t>) {
      round(i, seed);
    } else {
      round(seed);
    }
  }
}

}  // namespace purgatory::test
