#include "server/broker_runner.hpp"

#include <boost/asio/post.hpp>

namespace purgatory::broker {

BrokerRunner::BrokerRunner(BrokerConfig config)
    : broker_(std::make_unique<Broker>(io_, std::move(config))) {
  broker_->start();
  thread_ = std::thread([this] { io_.run(); });
}

BrokerRunner::~BrokerRunner() {
  stop();
}

void BrokerRunner::stop() {
  if (!thread_.joinable()) return;
  boost::asio::post(io_, [this] {
    broker_->stop();
    io_.stop();  // the timer driver may still hold a wait; nothing else is left to run
  });
  thread_.join();
}

}  // namespace purgatory::broker
