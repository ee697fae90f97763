// detail/pool_allocator.hpp: single objects from the task pool; arrays, objects larger than
// kMaxPooled and over-aligned ones from the global operator new; every instance equal to every
// other, so memory from one is freed by any, on any thread.
#include "purgatory/timer/detail/pool_allocator.hpp"

#include <cstdint>
#include <list>
#include <thread>

#include <doctest/doctest.h>

#include "purgatory/timer/detail/task_pool.hpp"
#include "timer_contract_support.hpp"

namespace {

using purgatory::contract::CountAllocations;
using purgatory::detail::PoolAllocator;

struct Small {
  char bytes[48];
};
struct Large {
  char bytes[purgatory::detail::kMaxPooled + 16];
};
struct alignas(64) Wide {
  char bytes[64];
};
// Small enough for the pool, but aligned beyond what its blocks are.
struct alignas(512) VeryWide {
  char bytes[512];
};

}  // namespace

TEST_CASE(
    "pool_allocator.hpp: single objects come from the pool, arrays and objects larger than "
    "kMaxPooled from the global operator new") {
  if (!CountAllocations::available() || !purgatory::detail::kTaskPoolOn) {
    MESSAGE("allocations not counted (ThreadSanitizer) or the pool is off (AddressSanitizer)");
    return;
  }
  PoolAllocator<Small> small;
  {
    const CountAllocations count;
    Small* p = small.allocate(1);
    p->bytes[47] = 1;
    small.deallocate(p, 1);
    CHECK(count.count() == 0);
  }
  {
    const CountAllocations count;
    Small* p = small.allocate(4);
    p[3].bytes[47] = 1;
    small.deallocate(p, 4);
    CHECK(count.count() == 1);
  }
  {
    PoolAllocator<Large> large;
    const CountAllocations count;
    Large* p = large.allocate(1);
    p->bytes[sizeof(Large) - 1] = 1;
    large.deallocate(p, 1);
    CHECK(count.count() == 1);
  }
}

TEST_CASE(
    "pool_allocator.hpp: over-aligned objects get their alignment, every instance is equal to "
    "every other (rebound ones too), and memory from one is freed by any, on any thread") {
  PoolAllocator<Wide> wide;
  for (int i = 0; i < 16; ++i) {
    Wide* p = wide.allocate(1);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    wide.deallocate(p, 1);
  }
  PoolAllocator<VeryWide> very_wide;
  for (int i = 0; i < 16; ++i) {
    VeryWide* p = very_wide.allocate(1);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 512 == 0);
    very_wide.deallocate(p, 1);
  }
  const PoolAllocator<int> a;
  const PoolAllocator<double> rebound(a);
  CHECK(a == rebound);
  CHECK(a == PoolAllocator<int>(rebound));
  CHECK_FALSE(a != rebound);
  // A node container filled on one thread and emptied on another, twice: the second round reuses
  // what the first gave back, and every value reads back as written.
  std::list<int, PoolAllocator<int>> nodes;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 10000; ++i)
      nodes.push_back(i + round);
    int expected = round;
    bool intact = true;
    for (const int v : nodes)
      intact = intact && v == expected++;
    CHECK(intact);
    std::thread([&] { nodes.clear(); }).join();
    CHECK(nodes.empty());
  }
}
