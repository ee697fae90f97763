// The task pool (detail/task_pool.hpp; docs/design.md, "The task pool", has the figures).
//
// A server adds tasks on its request threads and the timer frees them on its executor's thread.
// With glibc's malloc that pattern is slow: every free from the executor thread lands in the
// adding thread's arena, under that arena's lock, and fragments it; and a burst's fresh memory is
// faulted in 4 KiB at a time.
//
// Here blocks come from slabs: mappings of one size class (16-byte classes up to kMaxPooled
// bytes), each owned by one thread. The owning thread allocates from its slab's free list and
// fresh space without atomics or locks; a block freed by its owner goes back on that list, one
// freed by any other thread is pushed on the slab's given-back stack (one compare-and-swap), which
// the owner takes whole. A thread's slabs of a class double in size from 64 KiB to 2 MiB, and
// their fresh memory is faulted in 256 KiB at a time with one system call where the system has
// one (Linux's MADV_POPULATE_WRITE).
//
// Memory: a slab whose blocks are all free is released (unmapped; at most two empty 2 MiB slabs
// are kept for reuse) when its owner next looks at its slabs: every 4096 of its allocations of
// that class, and when the thread ends. A thread that ends with blocks still in use leaves their
// slabs to the next thread that needs a slab of that class. So a burst's memory is returned after
// it once the adding thread allocates again or ends; it is reused by the next burst meanwhile.
// Blocks larger than kMaxPooled go straight to the heap.
#include "purgatory/timer/detail/task_pool.hpp"

#include "purgatory/timer/detail/race_point.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

#include "platform/aligned_memory.hpp"
#include "platform/thread_exit.hpp"
#include "purgatory/timer/detail/platform.hpp"

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
std::size_t pool_mapped_bytes() noexcept {
  return 0;
}
std::size_t pool_orphan_allocations() noexcept {
  return 0;
}

#else

namespace {

constexpr std::size_t kClasses = kMaxPooled / kPoolGranule;
// Every slab starts at a multiple of kSlabAlign, so that a block finds its slab by masking its
// address; the largest slabs are that big.
constexpr std::size_t kSlabAlign = std::size_t{2} * 1024 * 1024;
// A thread's first slab of a class; each next one of that thread and class is twice as big, up
// to kSlabAlign: a thread that makes a few tasks maps little, a burst few mappings.
constexpr std::size_t kFirstSlab = std::size_t{64} * 1024;
// Empty kSlabAlign slabs kept mapped for the next thread that needs one (any class).
constexpr int kMaxSpares = 2;
// Every this many allocations of a class, a thread looks at its other slabs of that class and
// gives back the ones that are empty.
constexpr std::uint32_t kScanEvery = 4096;
// Fresh memory is faulted in this much at a time (MADV_POPULATE_WRITE), ahead of the blocks
// carved from it: one system call instead of 64 page faults. On a VM a fault cost about 9 us
// (timer_burst: 28,000 faults were a third of a 1M-task burst's CPU). Where the kernel lacks it
// (before Linux 5.14) the advice fails and the pages fault in one by one as before. Transparent
// huge pages (MADV_HUGEPAGE on the 2 MiB slabs) were tried: CPU per task a little lower still, but
// the burst's worst lateness was about 6 ms against 3 ms without (timer_burst, 10 and 8 runs), so
// they are not asked for.
constexpr std::size_t kPopulateBytes = std::size_t{256} * 1024;
// Blocks given back to the current slab are taken once there are this many (or nothing fresh is
// left in it).
constexpr std::uint64_t kCollectMin = 32;

struct FreeBlock {
  FreeBlock* next;
};

constexpr std::size_t class_of(std::size_t size) noexcept {
  return (size + kPoolGranule - 1) / kPoolGranule - 1;  // size in [1, kMaxPooled]
}
constexpr std::size_t bytes_of(std::size_t cls) noexcept {
  return (cls + 1) * kPoolGranule;
}

struct Heap;

// A slab: one mapping of blocks of one class, owned by one thread's heap. The owner takes blocks
// from `local` (blocks it freed itself) and `bump` (never used yet) without atomics; other threads
// give blocks back by pushing them onto `remote`, which the owner takes whole when `local` is dry.
struct Slab {
  // Set when the slab is made.
  std::uint32_t block_bytes = 0;
  std::size_t bytes = 0;  // mapped length, from the slab's address
  char* limit = nullptr;  // end of the blocks
  // The owner's: the heap in `owner`, or whoever holds the lock of the list the slab is on.
  FreeBlock* local = nullptr;
  char* bump = nullptr;
  char* populated = nullptr;
  std::uint32_t used = 0;  // blocks neither in `local` nor past `bump`: with users, or in `remote`
  Slab* next = nullptr;    // the owner's other slabs, or the abandoned or spare list
  Slab* prev = nullptr;    // the owner's other slabs
  // The heap that owns the slab; null while abandoned (its thread ended with blocks in use).
  // Read by every freeing thread, to know whether the block is its own.
  std::atomic<Heap*> owner{nullptr};
  // Blocks other threads gave back: (count << 32) | offset of the first; 0 when none. A stack
  // that is only pushed, and emptied whole by the owner: no ABA.
  alignas(64) std::atomic<std::uint64_t> remote{0};
};

constexpr std::size_t kHeaderBytes = (sizeof(Slab) + 63) / 64 * 64;

Slab* slab_of(const void* block) noexcept {
  return reinterpret_cast<Slab*>(reinterpret_cast<std::uintptr_t>(block) & ~(kSlabAlign - 1));
}

// One thread's slabs of one class.
struct ClassHeap;
void add_other(ClassHeap& ch, Slab* s) noexcept;
void remove_other(ClassHeap& ch, Slab* s) noexcept;

struct ClassHeap {
  Slab* current = nullptr;  // blocks are taken from here
  Slab* others = nullptr;   // the rest, linked through Slab::next and Slab::prev
  std::size_t next_bytes = kFirstSlab;
  std::uint32_t until_scan = kScanEvery;
};

// One thread's heap (ThreadHeap below); flush() hands its slabs on when the thread ends.
struct Heap {
  std::array<ClassHeap, kClasses> classes{};
};

std::atomic<std::size_t> g_mapped{0};

// Process-wide: abandoned slabs per class, spare empty slabs, and the heap that serves threads
// whose own heap is gone (they allocate while exiting). Never destroyed: threads may free blocks
// after static destructors ran.
struct Shared {
  std::mutex mu;
  std::array<Slab*, kClasses> abandoned{};  // guarded by mu
  Slab* spares = nullptr;                   // guarded by mu
  int spare_count = 0;                      // guarded by mu
  std::mutex orphan_mu;
  Heap orphan;                                     // guarded by orphan_mu
  std::atomic<std::size_t> orphan_allocations{0};  // written under orphan_mu
};

Shared& shared() {
  alignas(Shared) static unsigned char storage[sizeof(Shared)];
  static Shared* const s = new (storage) Shared();
  return *s;
}

void unmap(Slab* s) noexcept {
  const std::size_t bytes = s->bytes;
  s->~Slab();
  platform::release_aligned(s, bytes, kSlabAlign);
  g_mapped.fetch_sub(bytes, std::memory_order_relaxed);
}

// Gives an empty slab back: a full-size one to the spares while there is room, else to the system.
void release(Slab* s) noexcept {
  if (s->bytes == kSlabAlign) {
    Shared& sh = shared();
    const std::lock_guard<std::mutex> lock(sh.mu);
    if (sh.spare_count < kMaxSpares) {
      s->next = sh.spares;
      sh.spares = s;
      ++sh.spare_count;
      return;
    }
  }
  unmap(s);
}

void init(Slab* s, std::size_t bytes, std::size_t cls, Heap* owner) noexcept {
  s->block_bytes = static_cast<std::uint32_t>(bytes_of(cls));
  s->bytes = bytes;
  s->bump = reinterpret_cast<char*>(s) + kHeaderBytes;
  s->populated = reinterpret_cast<char*>(s) + 4096;
  s->limit = reinterpret_cast<char*>(s) + bytes;
  s->local = nullptr;
  s->used = 0;
  s->next = nullptr;
  s->prev = nullptr;
  s->owner.store(owner, std::memory_order_relaxed);
  s->remote.store(0, std::memory_order_relaxed);
}

// A new slab of `bytes` (<= kSlabAlign) at a multiple of kSlabAlign, or null.
Slab* map_slab(std::size_t bytes, std::size_t cls, Heap* owner) noexcept {
  if (bytes == kSlabAlign) {
    Shared& sh = shared();
    const std::lock_guard<std::mutex> lock(sh.mu);
    if (Slab* s = sh.spares; s != nullptr) {
      sh.spares = s->next;
      --sh.spare_count;
      init(s, bytes, cls, owner);
      return s;
    }
  }
  void* p = platform::reserve_aligned(bytes, kSlabAlign);
  if (p == nullptr) return nullptr;
  g_mapped.fetch_add(bytes, std::memory_order_relaxed);
  auto* s = new (p) Slab();
  init(s, bytes, cls, owner);
  return s;
}

// The block at the offset held in the low half of a given-back stack's word.
FreeBlock* block_at(Slab* s, std::uint64_t word) noexcept {
  return reinterpret_cast<FreeBlock*>(reinterpret_cast<char*>(s) + (word & 0xffffffffU));
}

// The owner takes the blocks other threads gave back. `local` must be empty.
bool collect(Slab* s) noexcept {
  if (s->remote.load(std::memory_order_relaxed) == 0) return false;
  const std::uint64_t r = s->remote.exchange(0, std::memory_order_acquire);
  s->local = block_at(s, r);
  s->used -= static_cast<std::uint32_t>(r >> 32);
  return true;
}

void push_remote(Slab* s, FreeBlock* b) noexcept {
  const std::uint64_t offset =
      static_cast<std::uint64_t>(reinterpret_cast<char*>(b) - reinterpret_cast<char*>(s));
  std::uint64_t old = s->remote.load(std::memory_order_relaxed);
  std::uint64_t next = 0;
  do {
    b->next = old == 0 ? nullptr : block_at(s, old);
    next = ((old >> 32) + 1) << 32 | offset;
  } while (!s->remote.compare_exchange_weak(old, next, std::memory_order_release,
                                            std::memory_order_relaxed));
}

void add_other(ClassHeap& ch, Slab* s) noexcept {
  s->prev = nullptr;
  s->next = ch.others;
  if (ch.others != nullptr) ch.others->prev = s;
  ch.others = s;
}

void remove_other(ClassHeap& ch, Slab* s) noexcept {
  if (s->prev != nullptr) {
    s->prev->next = s->next;
  } else {
    ch.others = s->next;
  }
  if (s->next != nullptr) s->next->prev = s->prev;
  s->next = s->prev = nullptr;
}

// The owner looks at its other slabs and releases the empty ones: every block not in `local` or
// past `bump` was given back (then no thread holds one, and no push is under way).
void scan(ClassHeap& ch) noexcept {
  for (Slab* s = ch.others; s != nullptr;) {
    Slab* next = s->next;
    const std::uint64_t r = s->remote.load(std::memory_order_acquire);
    if (s->used == static_cast<std::uint32_t>(r >> 32)) {
      remove_other(ch, s);
      release(s);
    }
    s = next;
  }
}

void* take(Slab* s) noexcept {
  FreeBlock* b = s->local;
  s->local = b->next;
  ++s->used;
  // The next block was most likely freed by another thread (a request is created on one thread and
  // completed on another): its lines sit in that core's cache. Ask for them now, for writing, so
  // that the next allocation and the constructor after it do not each wait for a transfer.
  if (auto* next = reinterpret_cast<const char*>(s->local); next != nullptr) {
    for (std::size_t at = 0; at < s->block_bytes; at += 64)
      prefetch_for_write(next + at);
  }
  return b;
}

void* carve(Slab* s) noexcept {
  if (s->bump + s->block_bytes > s->populated) {
    const std::size_t n = std::min<std::size_t>(kPopulateBytes, s->limit - s->populated);
    platform::prepare_for_write(s->populated, n);
    s->populated += n;
  }
  void* b = s->bump;
  s->bump += s->block_bytes;
  ++s->used;
  return b;
}

bool can_carve(const Slab* s) noexcept {
  return s->bump + s->block_bytes <= s->limit;
}

// `current` has no local block: find one, preferring memory already used over fresh memory.
void* allocate_slow(Heap* h, ClassHeap& ch, std::size_t cls) {
  if (PURGATORY_ALLOCATION_FAULT()) throw std::bad_alloc();  // the allocation sweep (tests only)
  Slab* s = ch.current;
  if (s != nullptr) {
    // Given-back blocks are taken a few at a time at least (one exchange per kCollectMin blocks,
    // not one per block, when a producer and a consumer take turns), unless nothing fresh is left.
    const std::uint64_t r = s->remote.load(std::memory_order_relaxed);
    if ((r >> 32) >= kCollectMin || (r != 0 && !can_carve(s))) {
      collect(s);
      return take(s);
    }
    if (can_carve(s)) return carve(s);
  }
  // `current` is used up: another slab of this thread with blocks given back takes its place.
  for (Slab* o = ch.others; o != nullptr; o = o->next) {
    if (o->local != nullptr || collect(o)) {
      remove_other(ch, o);
      if (s != nullptr) add_other(ch, s);
      ch.current = o;
      return take(o);
    }
  }
  // A new slab: one a thread left behind when it ended, else a mapping.
  Slab* n = nullptr;
  {
    Shared& sh = shared();
    const std::lock_guard<std::mutex> lock(sh.mu);
    if ((n = sh.abandoned[cls]) != nullptr) sh.abandoned[cls] = n->next;
  }
  if (n != nullptr) {
    n->next = nullptr;
    n->owner.store(h, std::memory_order_relaxed);
  } else {
    n = map_slab(ch.next_bytes, cls, h);
    if (n == nullptr) throw std::bad_alloc();
    ch.next_bytes = std::min(kSlabAlign, ch.next_bytes * 2);
  }
  if (s != nullptr) add_other(ch, s);
  ch.current = n;
  if (n->local != nullptr || collect(n)) return take(n);
  if (can_carve(n)) return carve(n);
  // An adopted slab with every block in use: look again (it is among the others next time).
  return allocate_slow(h, ch, cls);
}

void* allocate(Heap* h, std::size_t cls) {
  ClassHeap& ch = h->classes[cls];
  if (--ch.until_scan == 0) {
    ch.until_scan = kScanEvery;
    scan(ch);
  }
  if (Slab* s = ch.current; s != nullptr && s->local != nullptr) return take(s);
  return allocate_slow(h, ch, cls);
}

// Hands a heap's slabs on: empty ones are released, the rest wait on the abandoned list for a
// thread that needs a slab of their class (their blocks in use are given back to them meanwhile).
void flush(Heap& h) noexcept {
  for (std::size_t cls = 0; cls < kClasses; ++cls) {
    ClassHeap& ch = h.classes[cls];
    if (ch.current != nullptr) {
      add_other(ch, ch.current);
      ch.current = nullptr;
    }
    scan(ch);
    while (Slab* s = ch.others) {
      remove_other(ch, s);
      Shared& sh = shared();
      const std::lock_guard<std::mutex> lock(sh.mu);
      s->owner.store(nullptr, std::memory_order_relaxed);
      s->next = sh.abandoned[cls];
      sh.abandoned[cls] = s;
    }
  }
}

// The calling thread's heap, flushed when the thread ends; null from then on (blocks allocated
// from there come from the shared orphan heap).
using ThreadHeap = platform::PerThread<Heap, &flush>;

Heap* heap() noexcept {
  return ThreadHeap::get();
}

}  // namespace

void* pool_allocate(std::size_t size) {
  if (size == 0 || size > kMaxPooled) return ::operator new(size);
  const std::size_t cls = class_of(size);
  if (Heap* h = heap()) return allocate(h, cls);
  Shared& sh = shared();
  const std::lock_guard<std::mutex> lock(sh.orphan_mu);
  void* b = allocate(&sh.orphan, cls);
  sh.orphan_allocations.store(sh.orphan_allocations.load(std::memory_order_relaxed) + 1,
                              std::memory_order_relaxed);
  return b;
}

void pool_deallocate(void* block, std::size_t size) noexcept {
  if (size == 0 || size > kMaxPooled) {
    heap_free(block, size);
    return;
  }
  Slab* s = slab_of(block);
  auto* b = static_cast<FreeBlock*>(block);
  Heap* h = heap();
  if (h != nullptr && s->owner.load(std::memory_order_relaxed) == h) {
    b->next = s->local;
    s->local = b;
    // Its last block in use came back (then nothing is in `remote` either): an empty slab other
    // than the one allocated from is released at once.
    if (--s->used == 0) {
      ClassHeap& ch = h->classes[s->block_bytes / kPoolGranule - 1];
      if (s != ch.current) {
        remove_other(ch, s);
        release(s);
      }
    }
    return;
  }
  push_remote(s, b);
}

std::size_t pool_mapped_bytes() noexcept {
  return g_mapped.load(std::memory_order_relaxed);
}

std::size_t pool_orphan_allocations() noexcept {
  return shared().orphan_allocations.load(std::memory_order_relaxed);
}

#endif  // PURGATORY_TASK_POOL_OFF

}  // namespace purgatory::detail
