/// @file
/// Outcome: how a DelayedOperation ended. Every operation ends with exactly one, except those
/// cancel_for_key() hands back undecided to its caller.
#pragma once

#include <cstdint>
#include <string_view>

namespace purgatory {

/// How a DelayedOperation ended, or that it has not yet.
enum class Outcome : std::uint8_t {
  pending,    ///< not decided yet
  completed,  ///< try_complete() or force_complete() won: on_complete() ran
  expired,    ///< the timeout won: on_complete() then on_expiration() ran
  shut_down,  ///< the purgatory shut down first: on_complete() ran (on_expiration() did not)
  cancelled,  ///< withdrawn first (cancel(), or its async_watch() cancelled): on_complete() ran
};

/// The enumerator's name: "pending", "completed", "expired", "shut_down" or "cancelled".
[[nodiscard]] constexpr std::string_view to_string(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::pending:
      return "pending";
    case Outcome::completed:
      return "completed";
    case Outcome::expired:
      return "expired";
    case Outcome::shut_down:
      return "shut_down";
    case Outcome::cancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace purgatory
