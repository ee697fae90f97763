#include "purgatory/errors.hpp"

namespace purgatory {

OperationAlreadyWatched::OperationAlreadyWatched(const std::string& purgatory_name)
    : std::logic_error("purgatory '" + purgatory_name +
                       "': try_complete_else_watch: the operation is already watched (an "
                       "operation may be watched by one call, once)") {}

PurgatoryShutDown::PurgatoryShutDown(const std::string& purgatory_name, const char* call)
    : std::logic_error("purgatory '" + purgatory_name + "': " + call + " called after shutdown()") {
}

}  // namespace purgatory
