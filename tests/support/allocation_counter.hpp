// Counts what operator new hands out, to check the headers' memory claims. The suite binary links
// the tests' one replacement of the global operator new/delete (allocation_hooks.cpp); counting is
// always on, except under ThreadSanitizer, whose runtime defines operator new itself (then nothing
// is counted and the memory tests say so and check nothing more).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sanitizers.hpp"

namespace purgatory::contract {

struct AllocationCounts {
  std::int64_t live_bytes = 0;  // bytes held now (usable size of each block)
  std::uint64_t allocations = 0;
  std::uint64_t requested_bytes = 0;  // sum of the sizes asked for
};

// Every thread's allocations so far.
AllocationCounts allocation_counts() noexcept;

// False where operator new cannot be replaced (ThreadSanitizer).
bool counting_allocations() noexcept;

// Counts the operator new calls the calling thread makes while an instance lives. Not available
// under ThreadSanitizer: tests check available() and say so.
class CountAllocations {
 public:
  static constexpr bool available() { return !test::kThreadSanitizer; }
  CountAllocations();
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;
  [[nodiscard]] std::uint64_t count() const;

 private:
  std::uint64_t start_;
};

}  // namespace purgatory::contract
