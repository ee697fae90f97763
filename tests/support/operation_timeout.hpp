// The timeout task inside a DelayedOperation, for tests that look at or withdraw the timeout
// alone. Users cannot reach it (the operation's TimerTask base is private): these go through the
// library's internal access.
#pragma once

#include "purgatory/delayed_operation.hpp"
#include "purgatory/detail/operation_access.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace purgatory::testing {

// The operation's timeout, as a task (to add it to another timer, say).
inline TaskRef timeout_task(DelayedOperation& op) {
  return TaskRef(&detail::OperationAccess::task(op));
}
// Whether the operation's timeout is scheduled.
inline bool timeout_pending(DelayedOperation& op) {
  return detail::OperationAccess::task(op).is_pending();
}
// Withdraws the timeout only (TimerTask::cancel()), deciding nothing.
inline bool cancel_timeout(DelayedOperation& op) {
  return detail::OperationAccess::cancel_timeout(op);
}

}  // namespace purgatory::testing
