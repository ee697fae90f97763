// BrokerRunner: a Broker on its own io thread, for the in-process demo and the tests. The broker
// is bound (so port() is known) before the constructor returns.
#pragma once

#include <cstdint>
#include <memory>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "server/broker.hpp"
#include "server/broker_config.hpp"

namespace purgatory::broker {

// Construct, stop() and destroy from one thread; port() and metrics() are thread-safe.
class BrokerRunner {
 public:
  // Throws what Broker's constructor and start() throw (a bad config, a port in use).
  explicit BrokerRunner(BrokerConfig config);
  // stop().
  ~BrokerRunner();
  BrokerRunner(const BrokerRunner&) = delete;
  BrokerRunner& operator=(const BrokerRunner&) = delete;

  [[nodiscard]] std::uint16_t port() const noexcept { return broker_->port(); }
  [[nodiscard]] std::uint16_t metrics_port() const noexcept { return broker_->metrics_port(); }
  [[nodiscard]] BrokerMetrics metrics() const { return broker_->metrics(); }

  // Stops the broker on its thread and joins it. Idempotent.
  void stop();

 private:
  boost::asio::io_context io_;  // declared first: outlives the broker's sockets and timers
  std::unique_ptr<Broker> broker_;
  std::thread thread_;
};

}  // namespace purgatory::broker
