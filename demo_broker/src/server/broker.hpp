// Broker: the demo broker's server, and the one place its parts are put together. An Asio TCP
// acceptor and its connections, the in-memory LogStore, the simulated followers (Replication),
// one request handler per concern (ProduceHandler and FetchHandler with their purgatories,
// MetadataHandler, GroupHandler in front of the consumer-group coordinator and its two), the
// Prometheus endpoint and the live view: all sharing one timer driven by the io_context itself
// (an AsioTimer). No timer thread, no lock around broker state: every handler, completion and
// expiration runs on the one thread that runs the io_context.
//
//   boost::asio::io_context io;
//   purgatory::broker::Broker broker(io, config);
//   broker.start();                  // binds; port() tells the port when config.port was 0
//   io.run();                        // until something calls broker.stop() and io.stop()
//
// A request flows: a Connection reads a frame -> the Broker (its RequestDispatcher) decodes it
// and hands it by API key to its handler -> the handler answers at once or parks a delayed
// operation in its purgatory -> the answer fills the connection's response slot, and the
// connection writes responses strictly in request order.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "log/log_store.hpp"
#include "observability/broker_metrics.hpp"
#include "protocol/codec.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "requests/logger.hpp"
#include "server/broker_config.hpp"
#include "server/connection.hpp"
#include "server/request_dispatcher.hpp"

namespace purgatory::broker {

class FetchHandler;
class GroupCoordinator;
class GroupHandler;
class LiveView;
class MetadataHandler;
class OutcomeLog;
class ProduceHandler;
class Replication;
class StatusHttpServer;

// Call only from the io thread, except: the constructor and start() (before the io_context runs
// or on its thread), and port(), metrics_port(), ui_port() and metrics(), which are thread-safe.
// Errors: start() throws boost::system::system_error when it cannot bind (any of its ports); bad
// requests never throw out of the broker (they get a Kafka error code, or their connection
// closed with a log line).
class Broker final : private RequestDispatcher {
 public:
  // Throws std::invalid_argument, naming the value, for a config it cannot run (partitions < 1,
  // a negative or too-small max_request_bytes, fetch_max_bytes <= 0,
  // max_in_flight_per_connection == 0, max_producers_per_partition == 0).
  Broker(boost::asio::io_context& io, BrokerConfig config);
  // stop(). Call on the io thread, or after the io_context stopped running.
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Binds the listening socket and starts accepting connections; also the Prometheus endpoint
  // when config.metrics_host is set, and the live view when config.ui_host is.
  void start();
  // Closes the listener and every connection (their parked operations complete without writing
  // anything), shuts the purgatories and the group coordinator down and closes the timer.
  // Idempotent. The io_context may still hold the timer driver's last wait afterwards: stop it to
  // return from run() at once.
  void stop();

  [[nodiscard]] std::uint16_t port() const noexcept { return port_.load(); }
  // The metrics endpoint's bound port; 0 when there is none. Thread-safe.
  [[nodiscard]] std::uint16_t metrics_port() const noexcept;
  // The live view's bound port; 0 when there is none. Thread-safe.
  [[nodiscard]] std::uint16_t ui_port() const noexcept;
  [[nodiscard]] BrokerMetrics metrics() const;
  [[nodiscard]] const BrokerConfig& config() const noexcept { return config_; }
  // The live view (config.ui_host set), else null. `--demo --ui` plays the demo through it.
  [[nodiscard]] LiveView* live_view() noexcept { return live_view_.get(); }

 private:
  void accept();
  // RequestDispatcher, for the connections: decode, then hand to the request's handler.
  void dispatch(Connection& conn, ByteView frame) override;
  void on_malformed_frame(const Connection& conn) noexcept override;
  void on_connection_closed(const Connection& conn, std::size_t abandoned) override;
  // The header of `frame`, or none when it cannot be read (then `conn` is closed).
  [[nodiscard]] std::optional<RequestHeader> read_header(Connection& conn, Reader& reader);
  // Answers an ApiVersions request of a version newer than ours (KIP-511).
  void answer_unknown_api_versions(Connection& conn, const RequestHeader& header);
  void serve(const ResponseSlot& slot, const RequestHeader& header, RequestBody& body);
  [[nodiscard]] MetadataBroker self() const;

  boost::asio::io_context& io_;
  BrokerConfig config_;
  Logger logger_;
  std::string advertised_host_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<std::uint16_t> port_{0};
  LogStore log_;
  std::shared_ptr<SystemTimer> timer_;
  std::unique_ptr<OutcomeLog> outcomes_;  // parked requests' outcomes, for the live view
  std::unique_ptr<Replication> replication_;
  std::unique_ptr<ProduceHandler> produce_;
  std::unique_ptr<FetchHandler> fetch_;
  std::unique_ptr<MetadataHandler> metadata_;
  std::unique_ptr<GroupCoordinator> group_coordinator_;
  std::unique_ptr<GroupHandler> groups_;
  std::unique_ptr<StatusHttpServer> metrics_server_;  // null without config.metrics_host
  std::unique_ptr<LiveView> live_view_;               // null without config.ui_host
  ConnectionPolicy connection_policy_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Connection>> connections_;
  std::uint64_t next_connection_id_ = 0;
  bool stopped_ = false;

  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> open_{0};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> malformed_{0};
  std::atomic<std::uint64_t> abandoned_{0};
};

}  // namespace purgatory::broker
