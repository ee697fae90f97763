#include "purgatory/timer/detail/race_point.hpp"

#if defined(PURGATORY_RACE_HOOKS)

#include <atomic>

namespace purgatory::detail {
namespace {
std::atomic<RacePointHook> g_hook{nullptr};
std::atomic<AllocationFaultHook> g_fault_hook{nullptr};
}  // namespace

void set_allocation_fault_hook(AllocationFaultHook hook) noexcept {
  g_fault_hook.store(hook, std::memory_order_release);
}

bool allocation_fault() noexcept {
  const AllocationFaultHook hook = g_fault_hook.load(std::memory_order_acquire);
  return hook != nullptr && hook();
}

void set_race_point_hook(RacePointHook hook) noexcept {
  g_hook.store(hook, std::memory_order_release);
}

void race_point(const char* where) noexcept {
  if (const RacePointHook hook = g_hook.load(std::memory_order_acquire)) hook(where);
}

}  // namespace purgatory::detail

#endif
