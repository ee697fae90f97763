// RaceSchedule: makes race tests hit every run instead of once in 10^3.
//
// The library's race points (PURGATORY_RACE_POINT in purgatory/timer/detail/race_point.hpp) sit
// between a check and the action that depends on it. They are live only in the test-only
// libraries purgatory_timer_hooked and purgatory_purgatory_hooked. While a RaceSchedule exists,
// every point reached draws from the reaching thread's own generator, seeded from the schedule's
// seed and the order in which threads first reach a point, and with `pause_probability` yields or
// sleeps up to `max_pause`: the window stays open long enough for the other threads of the test to
// act inside it. A test may also attach an action to a named point (block until another thread has
// done something), for races that need one exact interleaving: at_each() and at_first() make the
// options of such a schedule.
//
//   RaceSchedule schedule({.seed = RaceSchedule::seed(iteration)});
//   ... run the racing threads ...
//   CHECK(schedule.hits("PeriodicTask::schedule_next") > 0);  // the window was exercised
//
// Seeds: RaceSchedule::seed(i) is PURGATORY_RACE_SEED (environment, default 1) mixed with i, and
// a failing test prints it (INFO) so the run can be replayed (for_each_seed() in seeded_rounds.hpp
// does both).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace purgatory::test {

// One at a time: constructing a second while one exists throws std::logic_error. Thread-safe
// while it exists (points are reached from any thread).
class RaceSchedule {
 public:
  struct Action {
    std::string point;             // a point whose name contains this
    std::function<void()> action;  // runs on the thread reaching it, each time
  };
  struct Options {
    std::uint64_t seed = 1;
    double pause_probability = 0.5;
    std::chrono::microseconds max_pause{200};
    std::string only{};  // pause only at points whose name contains this (empty: every point)
    std::vector<Action> actions{};
  };

  explicit RaceSchedule(Options options);
  ~RaceSchedule();
  RaceSchedule(const RaceSchedule&) = delete;
  RaceSchedule& operator=(const RaceSchedule&) = delete;

  // Times a point whose name contains `part` was reached.
  [[nodiscard]] std::uint64_t hits(std::string_view part) const;
  // Pauses taken (yields and sleeps), over every point.
  [[nodiscard]] std::uint64_t pauses() const;

  // The seed of iteration `i`: PURGATORY_RACE_SEED (default 1) mixed with i.
  [[nodiscard]] static std::uint64_t seed(std::uint64_t i);

  // The options of a schedule for one exact interleaving: no pauses, and `action` runs on the
  // thread reaching a point whose name contains `point`, each time one is reached.
  [[nodiscard]] static Options at_each(std::string point, std::function<void()> action) {
    return Options{.seed = seed(0),
                   .pause_probability = 0.0,
                   .actions = {Action{std::move(point), std::move(action)}}};
  }
  // The same, with `action` run only the first time such a point is reached.
  [[nodiscard]] static Options at_first(std::string point, std::function<void()> action) {
    auto first = std::make_shared<std::atomic<bool>>(true);
    return at_each(std::move(point), [first, action = std::move(action)] {
      if (first->exchange(false)) action();
    });
  }
};

}  // namespace purgatory::test
