#include "server/broker.hpp"

#include <chrono>
#include <exception>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <boost/asio/ip/address.hpp>

#include "group/group_coordinator.hpp"
#include "observability/prometheus_exposition.hpp"
#include "observability/status_http_server.hpp"
#include "purgatory/timer/asio.hpp"
#include "requests/fetch_handler.hpp"
#include "requests/group_handler.hpp"
#include "requests/metadata_handler.hpp"
#include "requests/outcome_log.hpp"
#include "requests/produce_handler.hpp"
#include "requests/replication.hpp"
#include "server/live_view.hpp"

namespace purgatory::broker {

namespace {

std::string advertised_host_for(const BrokerConfig& config) {
  if (!config.advertised_host.empty()) return config.advertised_host;
  if (config.host == "0.0.0.0" || config.host == "::" || config.host.empty()) return "127.0.0.1";
  return config.host;
}

BrokerConfig checked(BrokerConfig config) {
  if (config.partitions < 1) {
    throw std::invalid_argument(
        fmt::format("partitions = {}: a topic needs at least one partition", config.partitions));
  }
  if (config.max_request_bytes < kMinRequestFrameBytes) {
    throw std::invalid_argument(
        fmt::format("max_request_bytes = {} is below the smallest request ({} bytes)",
                    config.max_request_bytes, kMinRequestFrameBytes));
  }
  if (config.fetch_max_bytes <= 0) {
    throw std::invalid_argument(fmt::format(
        "fetch_max_bytes = {}: a Fetch could never return anything", config.fetch_max_bytes));
  }
  if (config.max_in_flight_per_connection == 0) {
    throw std::invalid_argument("max_in_flight_per_connection = 0: no request could be read");
  }
  if (config.max_producers_per_partition == 0) {
    throw std::invalid_argument(
        "max_producers_per_partition = 0: no idempotent producer could append");
  }
  return config;
}

std::shared_ptr<SystemTimer> make_timer(boost::asio::io_context& io) {
  TimerOptions options;
  options.name = "broker";
  return std::make_shared<AsioTimer>(io, std::move(options));
}

// The group coordinator's view of the rest of the broker: which partitions exist, and where its
// events, outcomes and errors go.
GroupCoordinatorHooks group_hooks(const LogStore& log, const Logger& logger, OutcomeLog& outcomes) {
  GroupCoordinatorHooks hooks;
  hooks.partition_exists = [&log](const std::string& topic, std::int32_t partition) {
    return log.find(TopicPartition{topic, partition}) != nullptr;
  };
  hooks.on_event = [&logger](std::string_view e) { logger.event(e); };
  hooks.on_outcome = [&outcomes](const GroupOutcome& o) {
    OutcomeEvent e;
    e.at = std::chrono::steady_clock::now();
    e.purgatory = o.purgatory;
    e.key = o.key;
    e.outcome = o.outcome;
    e.waited_ms = std::chrono::duration<double, std::milli>(o.waited).count();
    e.why = o.why;
    e.text = o.text;
    outcomes.add(std::move(e));
  };
  hooks.on_error = [&logger](std::string_view e) { logger.log(e); };
  return hooks;
}

}  // namespace

Broker::Broker(boost::asio::io_context& io, BrokerConfig config)
    : io_(io),
      config_(checked(std::move(config))),
      logger_(config_.log_sink, config_.on_event, config_.verbose),
      advertised_host_(advertised_host_for(config_)),
      acceptor_(io),
      log_(config_.partitions, config_.replication_delays.size(), config_.retention_bytes,
           config_.max_producers_per_partition),
      timer_(make_timer(io)),
      outcomes_(std::make_unique<OutcomeLog>()),
      connection_policy_{config_.max_request_bytes, config_.max_in_flight_per_connection,
                         config_.fault_drop_produce_response_every} {
  // A high-watermark move wakes the operations of both purgatories watching that partition.
  replication_ = std::make_unique<Replication>(log_, timer_, config_.replication_delays, logger_,
                                               [this](const TopicPartition& tp) {
                                                 fetch_->on_high_watermark_advanced(tp);
                                                 produce_->on_high_watermark_advanced(tp);
                                               });
  produce_ = std::make_unique<ProduceHandler>(log_, timer_, *replication_, *outcomes_, logger_);
  fetch_ =
      std::make_unique<FetchHandler>(log_, timer_, *outcomes_, logger_, config_.fetch_max_bytes);
  metadata_ = std::make_unique<MetadataHandler>(log_, logger_, config_.cluster_id,
                                                [this] { return self(); });
  group_coordinator_ = std::make_unique<GroupCoordinator>(timer_, config_.groups,
                                                          group_hooks(log_, logger_, *outcomes_));
  groups_ = std::make_unique<GroupHandler>(
      *group_coordinator_,
      [this] {
        const MetadataBroker me = self();
        FindCoordinatorResponse resp;
        resp.node_id = me.node_id;
        resp.host = me.host;
        resp.port = me.port;
        return resp;
      },
      logger_);
  if (!config_.ui_host.empty()) {
    live_view_ = std::make_unique<LiveView>(
        io_, config_,
        LiveView::Parts{log_, timer_, *replication_, *produce_, *fetch_, *group_coordinator_,
                        *outcomes_, logger_, [this] { return metrics(); },
                        [this] { return port(); }});
  }
}

Broker::~Broker() {
  stop();
}

void Broker::start() {
  namespace ip = boost::asio::ip;
  const ip::tcp::endpoint endpoint(ip::make_address(config_.host), config_.port);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(ip::tcp::acceptor::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
  port_.store(acceptor_.local_endpoint().port());
  if (!config_.metrics_host.empty()) {
    // On this io_context: a scrape renders on the io thread, between two requests.
    metrics_server_ =
        std::make_unique<StatusHttpServer>(io_, [this] { return to_prometheus_text(metrics()); });
    metrics_server_->start(config_.metrics_host, config_.metrics_port);
  }
  if (live_view_) live_view_->start();
  accept();
}

std::uint16_t Broker::metrics_port() const noexcept {
  return metrics_server_ ? metrics_server_->port() : 0;
}

std::uint16_t Broker::ui_port() const noexcept {
  return live_view_ ? live_view_->port() : 0;
}

void Broker::accept() {
  acceptor_.async_accept(
      [this](const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket) {
        if (stopped_ || ec == boost::asio::error::operation_aborted) return;
        if (!ec) {
          const std::uint64_t id = ++next_connection_id_;
          RequestDispatcher& dispatcher = *this;
          auto conn = std::make_shared<Connection>(std::move(socket), id, dispatcher,
                                                   connection_policy_, logger_);
          connections_.emplace(id, conn);
          accepted_.fetch_add(1, std::memory_order_relaxed);
          open_.fetch_add(1, std::memory_order_relaxed);
          if (logger_.verbose()) logger_.log(fmt::format("conn {} {}: accepted", id, conn->peer()));
          conn->start();
        } else {
          // EMFILE and the like: keep serving the connections we have, try again.
          logger_.log(fmt::format("accept failed: {}", ec.message()));
        }
        accept();
      });
}

void Broker::stop() {
  if (stopped_) return;
  stopped_ = true;
  replication_->stop();
  boost::system::error_code ec;
  acceptor_.close(ec);
  if (metrics_server_) metrics_server_->stop();
  if (live_view_) live_view_->stop();  // its requests complete, writing nothing
  auto connections = std::move(connections_);
  connections_.clear();
  for (auto& [id, conn] : connections)
    conn->close("broker shutting down");
  fetch_->shutdown();
  produce_->shutdown();
  group_coordinator_->shutdown();
  if (live_view_) live_view_->stop_members();  // their steps are cancelled; no LeaveGroup now
  (void)timer_->close();                       // drops pending follower catch-ups
}

void Broker::on_malformed_frame(const Connection& /*conn*/) noexcept {
  malformed_.fetch_add(1, std::memory_order_relaxed);
}

void Broker::on_connection_closed(const Connection& conn, std::size_t abandoned) {
  if (connections_.erase(conn.id()) > 0 || stopped_) open_.fetch_sub(1, std::memory_order_relaxed);
  abandoned_.fetch_add(abandoned, std::memory_order_relaxed);
}

BrokerMetrics Broker::metrics() const {
  BrokerMetrics m;
  m.fetch = fetch_->purgatory().metrics();
  m.produce = produce_->purgatory().metrics();
  m.connections_accepted = accepted_.load(std::memory_order_relaxed);
  m.connections_open = open_.load(std::memory_order_relaxed);
  m.requests = requests_.load(std::memory_order_relaxed);
  m.malformed_requests = malformed_.load(std::memory_order_relaxed);
  m.abandoned_operations = abandoned_.load(std::memory_order_relaxed);
  m.timer_pending_per_level = timer_->size_per_level();
  m.join = group_coordinator_->join_metrics();
  m.heartbeat = group_coordinator_->heartbeat_metrics();
  m.groups = group_coordinator_->stats();
  m.idempotence = produce_->idempotence();
  return m;
}

MetadataBroker Broker::self() const {
  return MetadataBroker{config_.node_id, advertised_host_, static_cast<std::int32_t>(port()), {}};
}

void Broker::dispatch(Connection& conn, ByteView frame) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  Reader reader(frame);
  const std::optional<RequestHeader> header = read_header(conn, reader);
  if (!header) return;
  const std::optional<VersionRange> api_range = codec_versions(ApiKey::api_versions);
  if (header->api_key == ApiKey::api_versions && !api_range->contains(header->api_version)) {
    answer_unknown_api_versions(conn, *header);
    return;
  }
  RequestBody body;
  try {
    body = decode_request_body(*header, reader);
  } catch (const DecodeError& e) {
    // As Kafka: a request that cannot be parsed closes its connection; others are untouched.
    malformed_.fetch_add(1, std::memory_order_relaxed);
    logger_.log(fmt::format("conn {} {}: malformed {} v{} request (corr={}), closing: {}",
                            conn.id(), conn.peer(), api_key_name(header->api_key),
                            header->api_version, header->correlation_id, e.what()));
    conn.close("malformed request");
    return;
  }
  const ResponseSlot slot = conn.open_slot(*header);
  try {
    serve(slot, *header, body);
  } catch (const std::exception& e) {
    // A bug or an exhausted resource while serving one request: that connection pays, the broker
    // goes on.
    logger_.log(fmt::format("conn {} {}: error serving {} v{} (corr={}), closing: {}", conn.id(),
                            conn.peer(), api_key_name(header->api_key), header->api_version,
                            header->correlation_id, e.what()));
    conn.close("internal error");
  }
}

std::optional<RequestHeader> Broker::read_header(Connection& conn, Reader& reader) {
  try {
    return read_request_header(reader);
  } catch (const DecodeError& e) {
    malformed_.fetch_add(1, std::memory_order_relaxed);
    logger_.log(fmt::format("conn {} {}: malformed request header, closing: {}", conn.id(),
                            conn.peer(), e.what()));
    conn.close("malformed request header");
    return std::nullopt;
  }
}

void Broker::answer_unknown_api_versions(Connection& conn, const RequestHeader& header) {
  // KIP-511: a client newer than us asks with a version we do not know. Answer in v0 with
  // UNSUPPORTED_VERSION and our table, so it retries with a version we speak.
  ApiVersionsResponse resp;
  resp.error_code = Errc::unsupported_version;
  resp.api_keys = broker_api_versions();
  const ResponseSlot slot = conn.open_slot(header);
  conn.respond(slot, encode_response(resp, 0, header.correlation_id),
               "UNSUPPORTED_VERSION, answered in v0 so the client retries lower");
}

void Broker::serve(const ResponseSlot& slot, const RequestHeader& header, RequestBody& body) {
  std::visit(
      [&](auto& req) {
        using T = std::decay_t<decltype(req)>;
        if constexpr (std::is_same_v<T, ApiVersionsRequest> || std::is_same_v<T, MetadataRequest>) {
          metadata_->handle(slot, req);
        } else if constexpr (std::is_same_v<T, ProduceRequest>) {
          produce_->handle(slot, std::move(req));
        } else if constexpr (std::is_same_v<T, InitProducerIdRequest>) {
          produce_->handle(slot, header, req);
        } else if constexpr (std::is_same_v<T, FetchRequest>) {
          fetch_->handle(slot, std::move(req));
        } else if constexpr (std::is_same_v<T, ListOffsetsRequest>) {
          fetch_->handle(slot, req);
        } else {
          static_assert(is_group_request_v<T>);
          groups_->handle(slot, header, req);
        }
      },
      body);
}

}  // namespace purgatory::broker
