#include "purgatory/timer/detail/task_pool.hpp"

#include <array>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

namespace purgatory::detail {
namespace {

// Sized delete where the compiler has it (clang 14 needs -fsized-deallocation), else plain delete.
void heap_free(void* block, [[maybe_unused]] std::size_t size) noexcept {
#if defined(__cpp_sized_deallocation)
  ::operator delete(block, size);
#else
  ::operator delete(block);
#endif
}

}  // namespace

#ifdef PURGATORY_TASK_POOL_OFF

// Under AddressSanitizer every block goes to the heap, so that a use after free is reported.
void* pool_allocate(std::size_t size) {
  return ::operator new(size);
}
void pool_deallocate(void* block, std::size_t size) noexcept {
  heap_free(block, size);
}

#else

namespace {

constexpr std::size_t kClasses = kMaxPooled / kPoolGranule;
// Blocks moved between a thread and the depot at once.
constexpr std::uint32_t kBatch = 256;
// Bytes the depot keeps per class; beyond it, batches go back to the heap.
constexpr std::size_t kDepotBytes = std::size_t{4} * 1024 * 1024;

struct FreeBlock {
  FreeBlock* next;
};

constexpr std::size_t class_of(std::size_t size) noexcept {
  return (size + kPoolGranule - 1) / kPoolGranule - 1;  // size in [1, kMaxPooled]
}
constexpr std::size_t bytes_of(std::size_t cls) noexcept {
  return (cls + 1) * kPoolGranule;
}

// Batches of kBatch blocks, linked through their first block.
struct Depot {
  std::mutex mu;
  std::vector<FreeBlock*> batches;  // guarded by mu
};

Depot& depot(std::size_t cls) {
  // Never destroyed (threads may free blocks after static destructors ran), and built in static
  // storage rather than with new: the first task of a process costs one heap allocation, its own.
  using Depots = std::array<Depot, kClasses>;
  alignas(Depots) static unsigned char storage[sizeof(Depots)];
  static Depots* const depots = new (storage) Depots();
  return (*depots)[cls];
}

void free_list(FreeBlock* head, std::size_t bytes) noexcept {
  while (head != nullptr) {
    FreeBlock* next = head->next;
    heap_free(head, bytes);
    head = next;
  }
}

// Hands a batch to the depot, or back to the heap when the depot is full.
void give_batch(std::size_t cls, FreeBlock* batch) noexcept {
  Depot& d = depot(cls);
  {
    const std::lock_guard<std::mutex> lock(d.mu);
    if ((d.batches.size() + 1) * kBatch * bytes_of(cls) <= kDepotBytes) {
      try {
        d.batches.push_back(batch);
        return;
      } catch (...) {  // no memory for the depot's list: free the batch instead
      }
    }
  }
  free_list(batch, bytes_of(cls));
}

FreeBlock* take_batch(std::size_t cls) noexcept {
  Depot& d = depot(cls);
  const std::lock_guard<std::mutex> lock(d.mu);
  if (d.batches.empty()) return nullptr;
  FreeBlock* batch = d.batches.back();
  d.batches.pop_back();
  return batch;
}

// One thread's cache, per class: `head` in use (count blocks) and at most one `full` batch.
// Trivially destructible, so that it stays usable while the thread's other thread_local objects
// are destroyed; Flusher empties it when the thread ends.
struct Cache {
  std::array<FreeBlock*, kClasses> head{};
  std::array<std::uint32_t, kClasses> count{};
  std::array<FreeBlock*, kClasses> full{};
  bool registered = false;
  bool ended = false;
};
thread_local Cache t_cache;

struct Flusher {
  Flusher() = default;
  Flusher(const Flusher&) = delete;
  Flusher& operator=(const Flusher&) = delete;
  ~Flusher() {
    Cache& c = t_cache;
    c.ended = true;  // blocks freed from here on go to the heap
    for (std::size_t cls = 0; cls < kClasses; ++cls) {
      if (c.full[cls] != nullptr) give_batch(cls, c.full[cls]);
      free_list(c.head[cls], bytes_of(cls));  // a partial batch: not worth a depot slot
      c.full[cls] = c.head[cls] = nullptr;
      c.count[cls] = 0;
    }
  }
};
thread_local Flusher t_flusher;

Cache* cache() noexcept {
  Cache& c = t_cache;
  if (c.ended) return nullptr;
  if (!c.registered) {
    c.registered = true;
    (void)&t_flusher;  // constructs it: its destructor runs when the thread ends
  }
  return &c;
}

}  // namespace

void* pool_allocate(std::size_t size) {
  if (size != 0 && size <= kMaxPooled) {
    const std::size_t cls = class_of(size);
    if (Cache* c = cache()) {
      FreeBlock* b = c->head[cls];
      if (b == nullptr) {
        b = c->full[cls];
        c->full[cls] = nullptr;
        if (b == nullptr) b = take_batch(cls);
        c->count[cls] = b != nullptr ? kBatch : 0;
      }
      if (b != nullptr) {
        c->head[cls] = b->next;
        --c->count[cls];
        // The next block was most likely freed by another thread (a request is created on one
        // thread and completed on another): its lines sit in that core's cache. Ask for them now,
        // for writing, so that the next allocation and the constructor after it do not each wait
        // for a transfer.
        if (auto* next = reinterpret_cast<const char*>(b->next); next != nullptr) {
          for (std::size_t at = 0; at < bytes_of(cls); at += 64)
            __builtin_prefetch(next + at, 1);
        }
        return b;
      }
    }
    return ::operator new(bytes_of(cls));
  }
  return ::operator new(size);
}

void pool_deallocate(void* block, std::size_t size) noexcept {
  if (size != 0 && size <= kMaxPooled) {
    const std::size_t cls = class_of(size);
    Cache* c = cache();
    if (c == nullptr) {
      heap_free(block, bytes_of(cls));
      return;
    }
    auto* b = static_cast<FreeBlock*>(block);
    b->next = c->head[cls];
    c->head[cls] = b;
    if (++c->count[cls] == kBatch) {  // a whole batch: set it aside, the older one to the depot
      if (c->full[cls] != nullptr) give_batch(cls, c->full[cls]);
      c->full[cls] = c->head[cls];
      c->head[cls] = nullptr;
      c->count[cls] = 0;
    }
    return;
  }
  heap_free(block, size);
}

#endif  // PURGATORY_TASK_POOL_OFF

}  // namespace purgatory::detail
