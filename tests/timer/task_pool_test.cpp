// The task pool behind make_task(callable) (detail/task_pool.hpp): blocks freed by another thread
// come back to the slab of the thread that allocated them; empty slabs are returned; slabs of a
// thread that ended go to the next thread; sizes past the pooled classes go to the heap.
#include "purgatory/timer/detail/task_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "platform/thread_exit.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace {

using purgatory::detail::pool_allocate;
using purgatory::detail::pool_deallocate;

constexpr std::size_t kExitingSize = 144;  // a class no other test here uses

void stamp_block(void* b, std::size_t size, std::uint64_t v) {
  auto* w = static_cast<std::uint64_t*>(b);
  for (std::size_t i = 0; i < size / 8; ++i)
    w[i] = v;
}
bool block_intact(const void* b, std::size_t size, std::uint64_t v) {
  const auto* w = static_cast<const std::uint64_t*>(b);
  for (std::size_t i = 0; i < size / 8; ++i) {
    if (w[i] != v) return false;
  }
  return true;
}

// Allocates from the pool when its thread ends, in a thread-exit hook (the platform layer's, the
// one the pool's own cleanup uses). Registered before the thread's first use of the pool, it runs
// after the pool's hook flushed the thread's heap (hooks run last registered first): then the
// thread is exiting.
struct AllocatesWhileExiting : purgatory::platform::ThreadExitHook {
  std::vector<std::pair<void*, std::uint64_t>>* kept = nullptr;  // handed to another thread
  std::atomic<int>* corrupted = nullptr;
  std::uint64_t id = 0;

  AllocatesWhileExiting() { run = &allocate_while_exiting; }
  static void allocate_while_exiting(ThreadExitHook& hook) noexcept {
    auto& self = static_cast<AllocatesWhileExiting&>(hook);
    self.allocate();
  }
  void allocate() {
    for (std::uint64_t i = 0; i < 300; ++i) {
      void* b = pool_allocate(kExitingSize);
      const std::uint64_t v = (id << 32) | i;
      stamp_block(b, kExitingSize, v);
      if (i % 2 == 0) {
        kept->emplace_back(b, v);
      } else {
        if (!block_intact(b, kExitingSize, v)) corrupted->fetch_add(1);
        pool_deallocate(b, kExitingSize);
      }
    }
  }
};

}  // namespace

TEST_CASE("task pool: every size gets a distinct, aligned, writable block, large ones too") {
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t size : {1, 8, 63, 64, 65, 128, 200, 511, 512, 513, 4096}) {
    for (int k = 0; k < 300; ++k) {  // past one batch per class
      void* b = pool_allocate(size);
      CHECK(reinterpret_cast<std::uintptr_t>(b) % alignof(std::max_align_t) == 0);
      std::memset(b, 0xab, size);
      blocks.emplace_back(b, size);
    }
  }
  std::set<void*> distinct;
  for (const auto& [b, size] : blocks)
    distinct.insert(b);
  CHECK(distinct.size() == blocks.size());
  for (const auto& [b, size] : blocks)
    pool_deallocate(b, size);
}

TEST_CASE("task pool: blocks another thread freed are reused by the allocating thread") {
  if (!purgatory::detail::kTaskPoolOn) {
    MESSAGE("the pool is off under AddressSanitizer");
    return;
  }
  constexpr std::size_t kSize = 192;  // a class no other test here uses
  constexpr int kBlocks = 2048;       // several slabs: 64, 128 and 256 KiB
  std::vector<void*> mine;
  for (int i = 0; i < kBlocks; ++i)
    mine.push_back(pool_allocate(kSize));
  const std::size_t mapped = purgatory::detail::pool_mapped_bytes();
  // Another thread frees them all, then ends: they are given back to this thread's slabs.
  std::thread([&] {
    for (void* b : mine)
      pool_deallocate(b, kSize);
  }).join();
  const std::set<void*> freed(mine.begin(), mine.end());
  std::vector<void*> again;
  for (int i = 0; i < kBlocks; ++i)
    again.push_back(pool_allocate(kSize));
  // No new memory: the current slab's never-used rest first, then the given-back blocks.
  CHECK(purgatory::detail::pool_mapped_bytes() == mapped);
  const auto reused =
      std::count_if(again.begin(), again.end(), [&](void* b) { return freed.count(b) != 0; });
  CHECK(reused >= kBlocks - 400);  // at most the rest of the 256 KiB slab (1364 blocks) is fresh
  for (void* b : again)
    pool_deallocate(b, kSize);
}

TEST_CASE("task pool: a burst's slabs are returned once its blocks are freed by another thread") {
  // task_pool.hpp: "a slab whose blocks are all free is released ... when its owner next looks
  // at its slabs: every 4096 of its allocations of that class, and when the thread ends".
  if (!purgatory::detail::kTaskPoolOn) {
    MESSAGE("the pool is off under AddressSanitizer");
    return;
  }
  constexpr std::size_t kSize = 176;  // a class no other test here uses
  constexpr int kBlocks = 5000;       // slabs of 64, 128, 256 and 512 KiB
  const std::size_t before = purgatory::detail::pool_mapped_bytes();
  std::vector<void*> burst;
  std::size_t at_peak = 0;
  std::size_t after_scan = 0;
  std::thread adder([&] {
    for (int i = 0; i < kBlocks; ++i)
      burst.push_back(pool_allocate(kSize));
    at_peak = purgatory::detail::pool_mapped_bytes();
    std::thread([&] {  // the executor's thread frees them
      for (void* b : burst)
        pool_deallocate(b, kSize);
    })
        .join();
    for (int i = 0; i < 4096; ++i)  // the adder goes on at a low rate: its slabs are looked at
      pool_deallocate(pool_allocate(kSize), kSize);
    after_scan = purgatory::detail::pool_mapped_bytes();
  });
  adder.join();
  CHECK(at_peak >= before + std::size_t{kBlocks} * kSize);
  // Every slab but the one in use is back with the system while the adder lives ...
  CHECK(after_scan <= before + 512 * 1024);
  // ... and that one when it ends.
  CHECK(purgatory::detail::pool_mapped_bytes() == before);
}

TEST_CASE("task pool: a thread that ends with blocks in use leaves its slab to the next thread") {
  if (!purgatory::detail::kTaskPoolOn) {
    MESSAGE("the pool is off under AddressSanitizer");
    return;
  }
  constexpr std::size_t kSize = 160;  // a class no other test here uses
  std::vector<void*> blocks;
  std::thread([&] {
    for (int i = 0; i < 100; ++i)
      blocks.push_back(pool_allocate(kSize));
  }).join();
  const std::size_t mapped = purgatory::detail::pool_mapped_bytes();
  std::vector<void*> more;
  std::thread([&] {  // takes the ended thread's slab: no new mapping
    for (int i = 0; i < 100; ++i)
      more.push_back(pool_allocate(kSize));
    CHECK(purgatory::detail::pool_mapped_bytes() == mapped);
    for (void* b : blocks)  // the first thread's blocks, freed by the slab's new owner
      pool_deallocate(b, kSize);
  })
      .join();
  std::set<void*> distinct(blocks.begin(), blocks.end());
  distinct.insert(more.begin(), more.end());
  CHECK(distinct.size() == 200);
  for (void* b : more)
    pool_deallocate(b, kSize);
}

TEST_CASE("task pool: make_task's tasks freed on the executor's thread, from many threads") {
  // What a server does: request threads build tasks, a timer thread drops the last reference.
  std::atomic<int> runs{0};
  std::vector<purgatory::TaskRef> handoff;
  std::mutex mu;
  std::vector<std::thread> makers;
  for (int t = 0; t < 4; ++t) {
    makers.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        auto task = purgatory::make_task([&runs] { runs.fetch_add(1); });
        const std::lock_guard<std::mutex> lock(mu);
        handoff.push_back(std::move(task));
      }
    });
  }
  std::thread dropper([&] {
    int dropped = 0;
    while (dropped < 20000) {
      std::vector<purgatory::TaskRef> batch;
      {
        const std::lock_guard<std::mutex> lock(mu);
        batch.swap(handoff);
      }
      dropped += static_cast<int>(batch.size());
    }
  });
  for (auto& t : makers)
    t.join();
  dropper.join();
  CHECK(handoff.empty());
}

TEST_CASE("task pool: threads that allocate, hand over, free and end never share a live block") {
  // Each block holds its holder's stamp from allocation until it is freed: two holders of one
  // block would overwrite each other's stamp. Threads end while others still hold their blocks,
  // so slabs are abandoned and taken over meanwhile.
  constexpr std::size_t kSize = 112;
  constexpr int kRounds = 6;
  constexpr int kThreads = 3;
  constexpr int kPerThread = 3000;
  std::atomic<int> corrupted{0};
  auto stamp = [](void* b, std::uint64_t v) {
    auto* w = static_cast<std::uint64_t*>(b);
    for (std::size_t i = 0; i < kSize / 8; ++i)
      w[i] = v;
  };
  auto intact = [](void* b, std::uint64_t v) {
    const auto* w = static_cast<const std::uint64_t*>(b);
    for (std::size_t i = 0; i < kSize / 8; ++i) {
      if (w[i] != v) return false;
    }
    return true;
  };
  std::vector<std::pair<void*, std::uint64_t>> handed;  // blocks of the previous round
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::vector<std::pair<void*, std::uint64_t>>> made(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        // Free a share of the previous round's blocks (made by threads that have ended) ...
        for (std::size_t i = static_cast<std::size_t>(t); i < handed.size(); i += kThreads) {
          if (!intact(handed[i].first, handed[i].second)) corrupted.fetch_add(1);
          pool_deallocate(handed[i].first, kSize);
        }
        // ... and make blocks for the next round, freeing every third one at once.
        for (int i = 0; i < kPerThread; ++i) {
          void* b = pool_allocate(kSize);
          const std::uint64_t v = (std::uint64_t(round) << 40) | (std::uint64_t(t) << 32) |
                                  static_cast<std::uint64_t>(i);
          stamp(b, v);
          if (i % 3 == 0) {
            if (!intact(b, v)) corrupted.fetch_add(1);
            pool_deallocate(b, kSize);
          } else {
            made[static_cast<std::size_t>(t)].emplace_back(b, v);
          }
        }
      });
    }
    for (auto& th : threads)
      th.join();
    handed.clear();
    for (auto& m : made)
      handed.insert(handed.end(), m.begin(), m.end());
    std::set<void*> distinct;
    for (const auto& [b, v] : handed)
      distinct.insert(b);
    CHECK(distinct.size() == handed.size());
  }
  for (const auto& [b, v] : handed) {
    if (!intact(b, v)) corrupted.fetch_add(1);
    pool_deallocate(b, kSize);
  }
  CHECK(corrupted.load() == 0);
}

TEST_CASE(
    "task pool: threads that are exiting may allocate and free (after their own heap ended: from "
    "the shared orphan heap), and their blocks may be freed by any thread") {
  if (!purgatory::detail::kTaskPoolOn) {
    MESSAGE("the pool is off under AddressSanitizer");
    return;
  }
  std::atomic<int> corrupted{0};
  std::vector<std::pair<void*, std::uint64_t>> all;
  for (std::uint64_t round = 0; round < 3; ++round) {
    const std::size_t orphans_before = purgatory::detail::pool_orphan_allocations();
    constexpr int kThreads = 2;
    std::vector<std::vector<std::pair<void*, std::uint64_t>>> kept(kThreads);
    std::vector<AllocatesWhileExiting> exiting(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        // Registered first, so run last: after the pool's heap of this thread has ended.
        AllocatesWhileExiting& hook = exiting[static_cast<std::size_t>(t)];
        hook.kept = &kept[static_cast<std::size_t>(t)];
        hook.corrupted = &corrupted;
        hook.id = round * kThreads + static_cast<std::uint64_t>(t) + 1;
        CHECK(purgatory::platform::at_thread_exit(hook));
        for (int i = 0; i < 100; ++i)  // the thread's own heap, in use before it exits
          pool_deallocate(pool_allocate(kExitingSize), kExitingSize);
      });
    }
    for (auto& th : threads)
      th.join();
    // Both threads (at once) allocated 300 blocks each while exiting, from the shared heap.
    CHECK(purgatory::detail::pool_orphan_allocations() - orphans_before == kThreads * 300);
    for (auto& k : kept) {
      CHECK(k.size() == 150);
      all.insert(all.end(), k.begin(), k.end());
    }
    std::set<void*> distinct;
    for (const auto& [b, v] : all)
      distinct.insert(b);
    CHECK(distinct.size() == all.size());
    // Half are freed here, by a thread that did not allocate them (given back to the shared heap's
    // slabs), while the next round's exiting threads allocate from that heap.
    if (round + 1 < 3) {
      for (std::size_t i = 0; i < all.size(); i += 2) {
        if (!block_intact(all[i].first, kExitingSize, all[i].second)) corrupted.fetch_add(1);
        pool_deallocate(all[i].first, kExitingSize);
      }
      std::vector<std::pair<void*, std::uint64_t>> rest;
      for (std::size_t i = 1; i < all.size(); i += 2)
        rest.push_back(all[i]);
      all.swap(rest);
    }
  }
  for (const auto& [b, v] : all) {
    if (!block_intact(b, kExitingSize, v)) corrupted.fetch_add(1);
    pool_deallocate(b, kExitingSize);
  }
  CHECK(corrupted.load() == 0);
}
