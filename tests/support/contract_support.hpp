// Small helpers shared by the contract tests (besides manual_timer.hpp and each component's own).
#pragma once

#include "manual_timer.hpp"

namespace purgatory::contract {

// A one-shot event: set() once, wait() from any thread (a latch of one).
using Signal = test::Latch;

}  // namespace purgatory::contract
