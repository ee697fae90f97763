/// @file
/// Version 0.1's header of OperationLock, now an implementation detail of DelayedOperation (lock
/// an operation with its own lock(), try_lock() and unlock()).
#pragma once

#include "purgatory/detail/operation_lock.hpp"

namespace purgatory {
/// Version 0.1's name; not part of the API any more.
using OperationLock [[deprecated("lock the DelayedOperation itself")]] = detail::OperationLock;
}  // namespace purgatory
