#include "process_metrics.hpp"

#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

namespace purgatory_bench {
namespace {

// Heap allocations, counted by the operator new below: per thread (no shared counter on the hot
// path), folded into a total when the thread ends.
std::atomic<std::uint64_t> g_allocations{0};
struct AllocationCount {
  std::uint64_t n = 0;
  ~AllocationCount() { g_allocations.fetch_add(n, std::memory_order_relaxed); }
};
// In this file, beside the operator new that counts on it.
thread_local AllocationCount t_allocations;

double cpu_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

double process_cpu_seconds() {
  return cpu_seconds(RUSAGE_SELF);
}

double thread_cpu_seconds() {
  return cpu_seconds(RUSAGE_THREAD);
}

long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stol(line.substr(prefix.size()));
  }
  return -1;
}

double rss_mib() {
  return static_cast<double>(status_kib("VmRSS")) / 1024.0;
}

void reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

std::uint64_t allocations_so_far() {
  return g_allocations.load(std::memory_order_relaxed) + t_allocations.n;
}

}  // namespace purgatory_bench

// Counts every heap allocation of the process (the library's, the harness's, Boost's). Not
// inlined: g++ would then pair `new` with free() and warn of a mismatch.
[[gnu::noinline]] void* operator new(std::size_t size) {
  ++purgatory_bench::t_allocations.n;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
