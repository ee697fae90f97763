// timer/async.hpp's promises about races (async_wait and friends against expiry and
// cancellation), tested on the hooked timer at its named race points. The rest of the header's
// promises: tests/timer/async_wait_test.cpp.
#include "purgatory/timer/async.hpp"

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <version>
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif
#include <thread>
#include <type_traits>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif
#include <doctest/doctest.h>

#include "purgatory/timer/asio.hpp"

#include "async_test_support.hpp"
#include "race_schedule.hpp"
#include "seeded_rounds.hpp"
#include "threads.hpp"
#include "timer_contract_support.hpp"

using namespace std::chrono_literals;
using boost::system::error_code;
using namespace purgatory;
using namespace purgatory::contract;
using namespace purgatory::test;

#if defined(__cpp_lib_jthread)

TEST_CASE(
    "async.hpp: a stop that comes once the task started running changes nothing: the wait "
    "succeeds once") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  purgatory::async_wait(m.timer, 5ms, stop.get_token(), c.handler());
  RaceSchedule schedule(RaceSchedule::at_each("ExpiredBatch::run_all: claimed, before run",
                                              [&] { stop.request_stop(); }));
  m.advance(5ms);
  io.run();
  CHECK(schedule.hits("claimed, before run") == 1);
  CHECK(c.seen == std::vector<error_code>{error_code()});
}

TEST_CASE(
    "async.hpp: a stop from another thread while async_wait() is still initiating (task added, "
    "not yet marked scheduled) cancels the wait") {
  ManualTimer m;
  boost::asio::io_context io;
  Completions c{io, {}};
  std::stop_source stop;
  RaceSchedule schedule(RaceSchedule::at_each(
      "async_wait: task added", [&] { on_another_thread([&] { stop.request_stop(); }); }));
  purgatory::async_wait(m.timer, 50ms, stop.get_token(), c.handler());
  CHECK(schedule.hits("async_wait: task added") == 1);
  CHECK(m.timer.size() == 0);
  m.advance(100ms);
  io.run();
  CHECK(c.seen == std::vector<error_code>{kAborted});
}

TEST_CASE(
    "async.hpp: exactly one completion per wait: 300 waits raced by stop requests, expiry on a "
    "2-thread executor and close() (seeded schedule, 3 rounds)") {
  const Watchdog watchdog("waits that must all complete");
  std::uint64_t hits = 0;
  for_each_seed(3, [&](std::uint64_t seed) {
    DrivenTimer<PoolExecutor> m({}, /*threads=*/2);
    RaceSchedule schedule({.seed = seed, .pause_probability = 0.3, .max_pause = 50us});
    boost::asio::io_context io;
    constexpr int kWaits = 300;
    std::vector<int> completions(kWaits, 0);
    std::vector<std::stop_source> stops(kWaits);
    std::mt19937_64 rng(seed);
    for (int i = 0; i < kWaits; ++i) {
      purgatory::async_wait(
          m.timer, Nanos{static_cast<Nanos::rep>(rng() % 20'000'000)}, stops[i].get_token(),
          boost::asio::bind_executor(io, [&completions, i](error_code) { ++completions[i]; }));
    }
    DriverThread driver(m);
    std::thread stopper([&, r = rng()] {
      std::mt19937_64 local(r);
      for (int i = 0; i < kWaits / 2; ++i)
        stops[local() % kWaits].request_stop();
    });
    stopper.join();
    std::this_thread::sleep_for(std::chrono::microseconds(seed % 5000));
    driver.stop();
    (void)m.timer.close();
    m.executor->shutdown();
    io.run();  // returns once every wait completed
    for (int i = 0; i < kWaits; ++i)
      CHECK(completions[i] == 1);
    hits += schedule.hits("ExpiredBatch::run_all") + schedule.hits("TimerTask::cancel");
  });
  CHECK(hits > 0);
}

#endif  // __cpp_lib_jthread
