#include "requests/partition_purgatory.hpp"

#include <exception>
#include <string_view>

#include <fmt/format.h>

namespace purgatory::broker {

std::unique_ptr<Purgatory> make_partition_purgatory(const std::shared_ptr<SystemTimer>& timer,
                                                    const char* name, const Logger& logger) {
  PurgatoryOptions options;
  options.name = name;
  options.shards = 1;
  // A fetch's max wait and a produce's replication timeout are a client's budget, not an alarm:
  // 12.5% late is within what Kafka's own broker gives (a 1 ms x 20 wheel polled every 200 ms),
  // and the timer then moves them down its levels less often (PurgatoryOptions::timeout_slack).
  options.timeout_slack = kTimeoutSlack;
  options.on_callback_error = [&logger](const DelayedOperation&, std::exception_ptr error,
                                        std::string_view where) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      logger.log(fmt::format("error: a delayed operation's {} threw: {}", where, e.what()));
    } catch (...) {
      logger.log(fmt::format("error: a delayed operation's {} threw a non-std exception", where));
    }
  };
  return std::make_unique<Purgatory>(timer, std::move(options));
}

}  // namespace purgatory::broker
