// Counts what operator new hands out, to check the headers' memory claims. The suite binary
// replaces the global operator new/delete (allocation_counter.cpp); counting is always on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace purgatory::contract {

struct AllocationCounts {
  std::int64_t live_bytes = 0;  // bytes held now (usable size of each block)
  std::uint64_t allocations = 0;
  std::uint64_t requested_bytes = 0;  // sum of the sizes asked for
};

// Every thread's allocations so far.
AllocationCounts allocation_counts() noexcept;

}  // namespace purgatory::contract
