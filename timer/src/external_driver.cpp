// ExternalDriver (external_driver.hpp): the public face of a SystemTimer's external-driver calls,
// which SystemTimer keeps private so that an AsioTimer, driving itself, never shows them.
#include "purgatory/timer/external_driver.hpp"

#include <chrono>
#include <climits>
#include <utility>

#include "purgatory/timer/detail/timer_access.hpp"

namespace purgatory {

ExternalDriver::ExternalDriver(SystemTimer& timer, std::function<void()> wakeup) : timer_(timer) {
  detail::TimerAccess::attach_driver(timer_, std::move(wakeup));
}

ExternalDriver::~ExternalDriver() {
  detail::TimerAccess::detach_driver(timer_);
}

std::optional<Nanos> ExternalDriver::arm() {
  return detail::TimerAccess::arm(timer_);
}

int ExternalDriver::timeout_ms() {
  const std::optional<Nanos> at = arm();
  if (!at) return -1;
  const Nanos left = *at - timer_.clock().now();
  if (left <= Nanos::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms >= INT_MAX ? INT_MAX : static_cast<int>(ms);
}

bool ExternalDriver::advance_clock(Nanos max_wait) {
  return detail::TimerAccess::advance_clock(timer_, max_wait);
}

}  // namespace purgatory
