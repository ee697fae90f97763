// What the process costs while a run goes on: CPU time, resident memory (from /proc/self/status)
// and heap allocations (counted by the replacement operator new in process_metrics.cpp).
#pragma once

#include <cstdint>

namespace purgatory_bench {

// User plus system CPU time, of the whole process or of the calling thread.
double process_cpu_seconds();
double thread_cpu_seconds();

// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), -1 when absent.
long status_kib(const char* field);
double rss_mib();
// Resets VmHWM so that each implementation's peak is its own.
void reset_peak_rss();

// Heap allocations so far: those of ended threads plus the calling thread's (a run's other
// threads end within the run).
std::uint64_t allocations_so_far();

}  // namespace purgatory_bench
