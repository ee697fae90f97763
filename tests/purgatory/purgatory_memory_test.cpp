// Memory stays bounded by what waits now: a million operations, each watched on 4 keys and
// completed through one of them, leave nothing behind: watched() returns to 0 at once and the
// process's resident memory to its starting level (no purge interval involved).
#include "purgatory/delayed_operation_purgatory.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory_test_support.hpp"

namespace purgatory::test {
namespace {

// The process's resident memory once glibc's malloc gave its free memory back (malloc_trim), from
// /proc: Linux with glibc only, nullopt elsewhere (the test then checks the counts only).
std::optional<long> trimmed_rss_bytes() {
#if defined(__GLIBC__)
  malloc_trim(0);
  long pages_total = 0;
  long pages_resident = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return std::nullopt;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = -1;
  std::fclose(f);
  return pages_resident * sysconf(_SC_PAGESIZE);
#else
  return std::nullopt;
#endif
}

class KeyedOperation final : public DelayedOperation {
 public:
  KeyedOperation() : DelayedOperation(std::chrono::hours(1)) {}
  bool completable = false;  // set by the test thread, which is the only one touching it

 protected:
  bool try_complete() override { return completable && force_complete(); }
  void on_complete() override {}
};

TEST_CASE("memory: 1000000 operations on 4 keys each completed through one key leave nothing") {
  // Sanitizers multiply allocation costs and keep freed memory in quarantine: fewer, and no RSS
  // check there (watched() and the key map are still checked).
  const int total = kSanitized ? 100'000 : 1'000'000;
  constexpr int kWave = 100'000;  // operations waiting at once
  constexpr int kSharedKeys = 1000;

  ManualPurgatory<std::int64_t> p;
  auto run_wave = [&](int wave) {
    std::vector<purgatory::Ref<KeyedOperation>> ops;
    ops.reserve(kWave);
    std::size_t pairs = 0;  // a key listed twice for one operation is watched once
    for (int i = 0; i < kWave; ++i) {
      const std::int64_t unique = 1'000'000'000 + std::int64_t{wave} * kWave + i;
      ops.emplace_back(new KeyedOperation);
      // One key of its own plus three shared with other operations (like partitions).
      const std::int64_t a = -1 - i % kSharedKeys;
      const std::int64_t b = -1 - (i * 7 + 3) % kSharedKeys;
      const std::int64_t c = -1 - (i * 13 + 5) % kSharedKeys;
      p.purgatory.try_complete_else_watch(ops.back(), {unique, a, b, c});
      pairs += 2 + static_cast<std::size_t>(b != a) + static_cast<std::size_t>(c != a && c != b);
    }
    CHECK(pairs > 3UL * kWave);
    CHECK(p.purgatory.watched() == pairs);
    CHECK(p.purgatory.num_delayed() == static_cast<std::size_t>(kWave));
    for (int i = 0; i < kWave; ++i) {
      ops[static_cast<std::size_t>(i)]->completable = true;
      const std::int64_t unique = 1'000'000'000 + std::int64_t{wave} * kWave + i;
      REQUIRE(p.purgatory.check_and_complete(unique) == 1);
    }
    // No purge interval: the other three keys let go at completion.
    CHECK(p.purgatory.watched() == 0);
    CHECK(p.purgatory.num_delayed() == 0);
    CHECK(p.manual.timer.size() == 0);
  };

  const std::optional<long> before_warm_up = trimmed_rss_bytes();
  run_wave(0);  // warm-up: allocator arenas, the wheel's overflow levels, shard maps
  const std::optional<long> start = trimmed_rss_bytes();
  for (int wave = 1; wave <= total / kWave; ++wave)
    run_wave(wave);
  const std::optional<long> end = trimmed_rss_bytes();
  if (!before_warm_up || !start || !end) {
    MESSAGE("no RSS here (it needs Linux's /proc and glibc's malloc_trim): counts checked only");
    return;
  }
  MESSAGE("RSS before warm-up: ", *before_warm_up / 1024, " KiB, after: ", *start / 1024,
          " KiB, after ", total, " operations: ", *end / 1024, " KiB");
  if (!kSanitized) {
    CHECK(*end - *start < 4L * 1024 * 1024);
    // Even the first wave's key maps and nodes were given back: a wave holds about 30 MB at its
    // peak (100,000 operations, their extra key nodes, 100,000 unique keys). What stays is the
    // allocators' slack: the task pool keeps, per thread, the slab it allocates from in each size
    // class used (three here: operations, extra key nodes, key entries; touched up to 2 MiB each)
    // and 2 spare slabs, and malloc keeps some too.
    CHECK(*end - *before_warm_up < 12L * 1024 * 1024);
  }
}

}  // namespace
}  // namespace purgatory::test
