#include "purgatory/version.hpp"

namespace purgatory {

// Compiled into the library: the headers a program includes may be of another version.
Version version() noexcept {
  return kHeaderVersion;
}

}  // namespace purgatory
