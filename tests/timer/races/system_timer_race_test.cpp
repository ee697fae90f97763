// timer/system_timer.hpp's thread-safety promise, on the hooked timer at its named race points
// (seeded schedule). The rest of the header's promises: tests/timer/system_timer_*_test.cpp.
#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

TEST_CASE(
    "system_timer.hpp: thread-safe: 4 threads add, add_at, reschedule, cancel and query one timer "
    "while another drives it onto a 2-thread executor (seeded schedule, 6 rounds)") {
  std::uint64_t hits = 0;
  for_each_seed(6, [&](std::uint64_t seed) {
    DrivenTimer<PoolExecutor> m({}, /*threads=*/2);
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.2, .max_pause = 50us});
    std::vector<purgatory::Ref<CountingTask>> tasks;
    for (int i = 0; i < 64; ++i)
      tasks.push_back(purgatory::make_task<CountingTask>());
    std::atomic<int> scheduled{0};  // adds and successful reschedules
    DriverThread driver(m);
    std::vector<std::thread> users;
    for (int u = 0; u < 4; ++u) {
      users.emplace_back([&, u] {
        std::mt19937_64 rng(seed * 31 + static_cast<std::uint64_t>(u));
        for (int op = 0; op < 400; ++op) {
          auto& t = tasks[rng() % tasks.size()];
          const Nanos delay{static_cast<Nanos::rep>(rng() % 4'000'000) - 500'000};
          switch (rng() % 7) {
            case 0:
              m.timer.add(t, delay);
              scheduled.fetch_add(1);
              break;
            case 1:
              m.timer.add_at(t, m.clock.now() + delay);
              scheduled.fetch_add(1);
              break;
            case 2:
              if (m.timer.reschedule(*t, delay)) scheduled.fetch_add(1);
              break;
            case 3:
              (void)t->cancel();
              break;
            case 4:
              (void)m.timer.size();
              (void)m.timer.next_expiration();
              break;
            case 5:
              (void)m.timer.size_per_level();
              (void)t->is_pending();
              break;
            default:
              (void)m.timer.wheel_memory_bytes();
              (void)m.timer.wakeups();
          }
        }
      });
    }
    for (std::thread& t : users)
      t.join();
    driver.stop();
    const auto handed_back = m.timer.close();
    m.executor->shutdown();
    int runs = 0;
    for (auto& t : tasks) {
      CHECK_FALSE(t->is_pending());
      runs += t->runs.load();
    }
    CHECK(runs + static_cast<int>(handed_back.size()) <= scheduled.load());
    CHECK(m.timer.size() == 0);
    hits += schedule.hits("SystemTimer::");
  });
  CHECK(hits > 0);
}
