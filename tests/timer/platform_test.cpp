// The timer's platform layer (timer/src/platform/): what the task pool, the thread slots and the
// thread names rely on, on every platform CI builds (glibc, libc++, MinGW-w64 under Wine).
#include "platform/thread_exit.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "platform/aligned_memory.hpp"
#include "platform/checked_math.hpp"
#include "platform/thread_name.hpp"

namespace {

using purgatory::platform::at_thread_exit;
using purgatory::platform::ThreadExitHook;

// Appends its id to a shared log when its thread ends; the first one also registers `then`.
struct LoggingHook : ThreadExitHook {
  std::atomic<int>* log = nullptr;  // ids, one decimal digit each, in the order they ran
  int id = 0;
  LoggingHook* then = nullptr;

  LoggingHook() { run = &log_exit; }
  static void log_exit(ThreadExitHook& hook) noexcept {
    auto& self = static_cast<LoggingHook&>(hook);
    int seen = self.log->load();
    while (!self.log->compare_exchange_weak(seen, seen * 10 + self.id)) {
    }
    if (self.then != nullptr) (void)at_thread_exit(*self.then);
  }
};

struct Counter {
  std::uint64_t value = 0;
  std::uint64_t id = 0;
};
std::atomic<int> g_cleanups{0};
std::atomic<std::uint64_t> g_cleaned_sum{0};
void count_cleanup(Counter& c) noexcept {
  g_cleanups.fetch_add(1);
  g_cleaned_sum.fetch_add(c.value);
}
using PerThreadCounter = purgatory::platform::PerThread<Counter, &count_cleanup>;

std::atomic<int> g_late_gets_null{0};
struct LateGet : ThreadExitHook {
  LateGet() { run = &get_late; }
  static void get_late(ThreadExitHook&) noexcept {
    if (PerThreadCounter::get() == nullptr) g_late_gets_null.fetch_add(1);
  }
};

}  // namespace

TEST_CASE(
    "platform: at_thread_exit hooks run once each when their thread ends, last registered first, "
    "and a hook may register another, which runs after it") {
  std::atomic<int> log{0};
  LoggingHook first;
  LoggingHook second;
  LoggingHook from_second;
  first.log = second.log = from_second.log = &log;
  first.id = 1;
  second.id = 2;
  from_second.id = 3;
  second.then = &from_second;
  std::thread([&] {
    CHECK(at_thread_exit(first));
    CHECK(at_thread_exit(second));
    CHECK(log.load() == 0);  // nothing runs before the thread ends
  }).join();
  CHECK(log.load() == 213);
}

TEST_CASE(
    "platform: PerThread gives each thread its own value-initialised state and cleans it up once "
    "when the thread ends, and a hook that runs after that cleanup gets null") {
  const int cleanups_before = g_cleanups.load();
  const std::uint64_t sum_before = g_cleaned_sum.load();
  constexpr int kThreads = 4;
  std::vector<Counter*> seen(kThreads, nullptr);
  std::vector<LateGet> late(kThreads);
  std::atomic<int> arrived{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CHECK(at_thread_exit(late[static_cast<std::size_t>(t)]));  // runs after the cleanup
      Counter* c = PerThreadCounter::get();
      REQUIRE(c != nullptr);
      CHECK(c->value == 0);
      CHECK(c->id == 0);
      CHECK(PerThreadCounter::get() == c);  // the same on every call
      c->value = static_cast<std::uint64_t>(t) + 1;
      seen[static_cast<std::size_t>(t)] = c;
      // All alive at once, so that no two of them can share memory one left behind.
      arrived.fetch_add(1);
      while (arrived.load() < kThreads)
        std::this_thread::yield();
    });
  }
  for (auto& th : threads)
    th.join();
  for (int a = 0; a < kThreads; ++a) {
    for (int b = a + 1; b < kThreads; ++b)
      CHECK(seen[static_cast<std::size_t>(a)] != seen[static_cast<std::size_t>(b)]);
  }
  CHECK(g_cleanups.load() - cleanups_before == kThreads);
  CHECK(g_cleaned_sum.load() - sum_before == 1 + 2 + 3 + 4);  // each thread's own value
  CHECK(g_late_gets_null.load() == kThreads);
}

TEST_CASE("platform: a thread that never asks for PerThread state runs no cleanup for it") {
  const int cleanups_before = g_cleanups.load();
  std::thread([] {}).join();
  CHECK(g_cleanups.load() == cleanups_before);
}

TEST_CASE(
    "platform: reserve_aligned gives writable memory at the asked alignment (64 KiB to 2 MiB "
    "blocks on 2 MiB), distinct each time, and release_aligned takes it back") {
  constexpr std::size_t kAlign = std::size_t{2} * 1024 * 1024;
  std::vector<std::pair<char*, std::size_t>> blocks;
  for (std::size_t bytes = 64 * 1024; bytes <= kAlign; bytes *= 2) {
    for (int k = 0; k < 3; ++k) {
      auto* p = static_cast<char*>(purgatory::platform::reserve_aligned(bytes, kAlign));
      REQUIRE(p != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % kAlign == 0);
      purgatory::platform::prepare_for_write(p, bytes);
      std::memset(p, 0x5a, bytes);
      CHECK(p[bytes - 1] == 0x5a);
      blocks.emplace_back(p, bytes);
    }
  }
  for (std::size_t a = 0; a < blocks.size(); ++a) {
    for (std::size_t b = a + 1; b < blocks.size(); ++b) {
      const bool apart = blocks[a].first + blocks[a].second <= blocks[b].first ||
                         blocks[b].first + blocks[b].second <= blocks[a].first;
      CHECK(apart);
    }
  }
  for (const auto& [p, bytes] : blocks)
    purgatory::platform::release_aligned(p, bytes, kAlign);
}

TEST_CASE("platform: multiply_checked reports int64 overflow, both signs, instead of wrapping") {
  using purgatory::platform::multiply_checked;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  std::int64_t r = 0;
  CHECK(multiply_checked(1'000'000, 86'400'000'000, r));
  CHECK(r == 86'400'000'000'000'000);
  CHECK(multiply_checked(-3, 7, r));
  CHECK(r == -21);
  CHECK(multiply_checked(kMax, 1, r));
  CHECK(r == kMax);
  CHECK(multiply_checked(kMin, 1, r));
  CHECK(r == kMin);
  CHECK(multiply_checked(0, kMin, r));
  CHECK(r == 0);
  CHECK_FALSE(multiply_checked(kMax, 2, r));
  CHECK_FALSE(multiply_checked(kMin, -1, r));
  CHECK_FALSE(multiply_checked(kMin, 2, r));
  CHECK_FALSE(multiply_checked(-2, kMax, r));
  CHECK_FALSE(multiply_checked(3'037'000'500, 3'037'000'500, r));  // just past sqrt(2^63)
}

TEST_CASE(
    "platform: start_named_thread names the new thread before it returns, with the first 15 "
    "bytes of the name on every platform, and name_this_thread renames the calling thread") {
  std::string inside;
  std::string renamed;
  std::thread t = purgatory::platform::start_named_thread("reaper-platform-test", [&] {
    inside = purgatory::platform::this_thread_name();
    purgatory::platform::name_this_thread("renamed");
    renamed = purgatory::platform::this_thread_name();
  });
  t.join();
#if defined(__linux__) || defined(__APPLE__) || defined(_WIN32)
  CHECK(inside == "reaper-platform");
  CHECK(renamed == "renamed");
#else
  MESSAGE("this platform cannot name threads: nothing to check");
#endif
}
