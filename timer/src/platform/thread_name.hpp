// Internal (platform layer): the names the library gives its threads ("reaper-<timer>",
// "exec-<timer>"), shown by debuggers, profilers and `top -H`.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace purgatory::platform {

// Names the calling thread. Linux keeps the first 15 bytes, macOS 63; Windows (10 1607 and later)
// keeps it whole. Does nothing where the system cannot name threads. Never fails.
void name_this_thread(std::string_view name) noexcept;

// The calling thread's name, as name_this_thread() set it (truncated as the system keeps it);
// empty where the system cannot tell. For tests and diagnostics.
[[nodiscard]] std::string this_thread_name();

// Starts a thread that names itself with the first 15 bytes of `name` (what Linux keeps, kept the
// same everywhere) and then runs `body`. The name is set when this returns, so that whoever looks
// at the process's threads at once sees it.
[[nodiscard]] std::thread start_named_thread(std::string name, std::function<void()> body);

}  // namespace purgatory::platform
