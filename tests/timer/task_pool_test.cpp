// The task pool behind make_task(callable) (detail/task_pool.hpp): blocks freed by another thread
// come back to an allocating thread through the depot, whole batches at a time; sizes past the
// pooled classes and exiting threads go to the heap.
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

#include "purgatory/timer/timer_task.hpp"

namespace {

using purgatory::detail::pool_allocate;
using purgatory::detail::pool_deallocate;

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
  constexpr int kBlocks = 2048;       // 8 batches
  std::vector<void*> mine;
  for (int i = 0; i < kBlocks; ++i)
    mine.push_back(pool_allocate(kSize));
  // Another thread frees them all, then ends: its batches are in the depot.
  std::thread([&] {
    for (void* b : mine)
      pool_deallocate(b, kSize);
  }).join();
  const std::set<void*> freed(mine.begin(), mine.end());
  std::vector<void*> again;
  for (int i = 0; i < kBlocks; ++i)
    again.push_back(pool_allocate(kSize));
  const auto reused =
      std::count_if(again.begin(), again.end(), [&](void* b) { return freed.count(b) != 0; });
  CHECK(reused == kBlocks);  // every freed block was a whole batch: none was lost to the heap
  for (void* b : again)
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
