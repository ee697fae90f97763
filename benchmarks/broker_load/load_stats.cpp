#include "load_stats.hpp"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

namespace broker_load {

std::uint32_t micros(Clock::duration d) {
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(d).count(), 0, UINT32_MAX));
}

std::string percentiles(std::vector<std::uint32_t>& v) {
  if (v.empty()) return "no samples";
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))] /
           1000.0;
  };
  return fmt::format("p50 {:.2f} ms, p99 {:.2f} ms, p999 {:.2f} ms, max {:.2f} ms ({} samples)",
                     at(0.5), at(0.99), at(0.999), v.back() / 1000.0, v.size());
}

}  // namespace broker_load
