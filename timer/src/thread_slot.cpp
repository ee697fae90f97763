// Which base of a SystemTimer a thread adds to (detail/thread_slot.hpp): the table of the slots
// live threads hold.
#include "thread_slot.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <new>
#include <vector>

#include "platform/thread_exit.hpp"

namespace purgatory::detail {
namespace {

constexpr std::uint32_t kUnassigned = std::numeric_limits<std::uint32_t>::max();

// Slots of the live threads: a thread takes the lowest free one and gives it back when it ends,
// so the threads alive at any time hold distinct, dense slots and spread evenly over the bases
// (short-lived threads do not pile up on one base). Never destroyed: threads may end after
// static destructors ran. Built in static storage, not on the heap: assign_thread_slot() is
// noexcept, and out of memory it must still find the table.
struct SlotTable {
  std::mutex mu;
  std::vector<bool> used;  // guarded by mu
};
SlotTable& slot_table() noexcept {
  alignas(SlotTable) static unsigned char storage[sizeof(SlotTable)];
  static SlotTable* const table = new (storage) SlotTable();
  return *table;
}

struct ThreadSlot {
  std::uint32_t slot = kUnassigned;   // what the thread uses (a test may set it)
  std::uint32_t owned = kUnassigned;  // what it took from the table, given back at its end
};
void give_back(ThreadSlot& s) noexcept {
  if (s.owned == kUnassigned) return;
  SlotTable& t = slot_table();
  const std::lock_guard<std::mutex> guard(t.mu);
  t.used[s.owned] = false;
}
// The thread's ThreadSlot, given back when the thread ends.
using ThreadSlots = platform::PerThread<ThreadSlot, &give_back>;
// The slot again, in a plain thread_local: the add path reads just this, with no check that the
// thread's cleanup was registered (ThreadSlots::get() makes that check).
thread_local std::uint32_t t_fast_slot = kUnassigned;

std::uint32_t assign_thread_slot() noexcept {
  ThreadSlot* ts = ThreadSlots::get();
  if (ts == nullptr) return 0;  // the thread is ending (its slot was given back): share slot 0
  if (ts->slot == kUnassigned) {
    SlotTable& t = slot_table();
    const std::lock_guard<std::mutex> guard(t.mu);
    const auto free = std::find(t.used.begin(), t.used.end(), false);
    const auto slot = static_cast<std::uint32_t>(free - t.used.begin());
    try {
      if (free == t.used.end()) {
        t.used.push_back(true);
      } else {
        *free = true;
      }
      ts->owned = slot;
    } catch (...) {
      // Out of memory: share slot 0 (correct, only less spread).
      return 0;
    }
    ts->slot = slot;
  }
  t_fast_slot = ts->slot;
  return ts->slot;
}

}  // namespace

std::uint32_t timer_thread_slot() noexcept {
  const std::uint32_t slot = t_fast_slot;
  return slot != kUnassigned ? slot : assign_thread_slot();
}

void set_timer_thread_slot(std::uint32_t slot) noexcept {
  (void)timer_thread_slot();  // takes (and later gives back) a slot of its own as usual
  if (ThreadSlot* ts = ThreadSlots::get()) ts->slot = slot;
  t_fast_slot = slot;
}

}  // namespace purgatory::detail
