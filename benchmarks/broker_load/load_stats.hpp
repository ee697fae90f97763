// What the load measures: responses counted by kind, and latency samples in microseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace broker_load {

using Clock = std::chrono::steady_clock;

struct Stats {
  std::vector<std::uint32_t> produce_us, fetch_us, time_to_data_us;
  std::uint64_t responses = 0, produce_responses = 0, fetch_responses = 0, empty_fetches = 0;
  std::uint64_t records_consumed = 0;
};

// A duration in whole microseconds, clamped to what a sample holds.
std::uint32_t micros(Clock::duration d);

// "p50 .. ms, p99 .. ms, p999 .. ms, max .. ms (N samples)"; sorts the samples.
std::string percentiles(std::vector<std::uint32_t>& v);

}  // namespace broker_load
