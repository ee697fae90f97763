/// @file
/// Errors of the purgatory layer. Style: exceptions. Misuse throws a typed exception naming what
/// was wrong; a user callback's exception never escapes into the library's threads (it goes to the
/// purgatory's CallbackErrorHandler).
#pragma once

#include <stdexcept>
#include <string>

#include "purgatory/export.hpp"

namespace purgatory {

/// Thrown by try_complete_else_watch() for an operation that a previous call already watched. An
/// operation is watched at most once in its life (it is one request, with one timeout).
class PURGATORY_EXPORT OperationAlreadyWatched : public std::logic_error {
 public:
  /// The message names the purgatory.
  explicit OperationAlreadyWatched(const std::string& purgatory_name);
};

/// A purgatory used after shutdown() (or while it runs): nothing new may be watched or checked.
class PURGATORY_EXPORT PurgatoryShutDown : public std::logic_error {
 public:
  /// The message names the purgatory and the call refused.
  PurgatoryShutDown(const std::string& purgatory_name, const char* call);
};

}  // namespace purgatory
