// The broken invariants of a run, counted, the first ones kept to be printed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace broker_load {

struct Failures {
  std::uint64_t count = 0;
  std::vector<std::string> first;
  void add(std::string what) {
    if (++count <= 20) first.push_back(std::move(what));
  }
};

}  // namespace broker_load
