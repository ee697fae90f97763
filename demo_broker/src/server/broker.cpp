#include "purgatory/broker/broker.hpp"

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <boost/asio/ip/address.hpp>

#include "connection.hpp"
#include "purgatory/broker/group_coordinator.hpp"
#include "purgatory/broker/in_process_member.hpp"
#include "purgatory/broker/metrics_server.hpp"
#include "purgatory/broker/prometheus_exposition.hpp"
#include "purgatory/timer/timer_task.hpp"
#include "requests/outcome_log.hpp"
#include "server/group_handler.hpp"
#include "server/ui_responder.hpp"

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

}  // namespace

Broker::Broker(boost::asio::io_context& io, BrokerConfig config)
    : io_(io),
      config_(checked(std::move(config))),
      advertised_host_(advertised_host_for(config_)),
      acceptor_(io),
      log_(config_.partitions, config_.replication_delays.size(), config_.retention_bytes,
           config_.max_producers_per_partition),
      first_producer_id_(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count()),
      next_producer_id_(first_producer_id_) {
  TimerOptions timer_options;
  timer_options.name = "broker";
  timer_ = std::make_shared<AsioTimer>(io_, std::move(timer_options));
  const auto make_purgatory = [this](const char* name) {
    PurgatoryOptions options;
    options.name = name;
    options.shards = 1;  // one thread touches it: more shards would only cost memory
    options.on_callback_error = [this](const DelayedOperation&, std::exception_ptr error,
                                       std::string_view where) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        log(fmt::format("error: a delayed operation's {} threw: {}", where, e.what()));
      } catch (...) {
        log(fmt::format("error: a delayed operation's {} threw a non-std exception", where));
      }
    };
    return std::make_unique<Purgatory>(timer_, std::move(options));
  };
  outcomes_ = std::make_unique<OutcomeLog>();
  fetch_purgatory_ = make_purgatory("fetch");
  produce_purgatory_ = make_purgatory("produce");
  GroupCoordinatorHooks hooks;
  hooks.partition_exists = [this](const std::string& topic, std::int32_t partition) {
    return log_.find(topic, partition) != nullptr;
  };
  hooks.on_event = [this](std::string_view e) { event(e); };
  hooks.on_outcome = [this](const GroupOutcome& o) {
    OutcomeEvent e;
    e.at = std::chrono::steady_clock::now();
    e.purgatory = o.purgatory;
    e.key = o.key;
    e.outcome = o.outcome;
    e.waited_ms = std::chrono::duration<double, std::milli>(o.waited).count();
    e.why = o.why;
    e.text = o.text;
    outcomes_->add(std::move(e));
  };
  hooks.on_error = [this](std::string_view e) { log(e); };
  group_coordinator_ = std::make_unique<GroupCoordinator>(timer_, config_.groups, std::move(hooks));
  group_handler_ = std::make_unique<GroupHandler>(
      *group_coordinator_,
      [this] {
        FindCoordinatorResponse self;
        self.node_id = config_.node_id;
        self.host = advertised_host_;
        self.port = port();
        return self;
      },
      [this](std::string_view line) { log(line); });
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
        std::make_unique<MetricsServer>(io_, [this] { return to_prometheus_text(metrics()); });
    metrics_server_->start(config_.metrics_host, config_.metrics_port);
  }
  if (!config_.ui_host.empty()) start_live_view();
  accept();
}

std::uint16_t Broker::metrics_port() const noexcept {
  return metrics_server_ ? metrics_server_->port() : 0;
}

std::uint16_t Broker::ui_port() const noexcept {
  return ui_server_ ? ui_server_->port() : 0;
}

void Broker::accept() {
  acceptor_.async_accept(
      [this](const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket) {
        if (stopped_ || ec == boost::asio::error::operation_aborted) return;
        if (!ec) {
          const std::uint64_t id = ++next_connection_id_;
          auto conn = std::make_shared<Connection>(*this, std::move(socket), id);
          connections_.emplace(id, conn);
          accepted_.fetch_add(1, std::memory_order_relaxed);
          open_.fetch_add(1, std::memory_order_relaxed);
          if (config_.verbose) log(fmt::format("conn {} {}: accepted", id, conn->peer()));
          conn->start();
        } else {
          // EMFILE and the like: keep serving the connections we have, try again.
          log(fmt::format("accept failed: {}", ec.message()));
        }
        accept();
      });
}

void Broker::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  if (metrics_server_) metrics_server_->stop();
  if (ui_server_) ui_server_->stop();
  if (ui_responder_) ui_responder_->close("broker shutting down");
  auto connections = std::move(connections_);
  connections_.clear();
  for (auto& [id, conn] : connections)
    conn->close("broker shutting down");
  fetch_purgatory_->shutdown();
  produce_purgatory_->shutdown();
  group_coordinator_->shutdown();
  ui_members_.clear();    // their steps are cancelled; no LeaveGroup after shutdown
  (void)timer_->close();  // drops pending follower catch-ups
}

void Broker::on_connection_closed(std::uint64_t id, std::size_t abandoned_operations) {
  if (connections_.erase(id) > 0 || stopped_) open_.fetch_sub(1, std::memory_order_relaxed);
  abandoned_.fetch_add(abandoned_operations, std::memory_order_relaxed);
}

BrokerMetrics Broker::metrics() const {
  BrokerMetrics m;
  m.fetch = fetch_purgatory_->metrics();
  m.produce = produce_purgatory_->metrics();
  m.connections_accepted = accepted_.load(std::memory_order_relaxed);
  m.connections_open = open_.load(std::memory_order_relaxed);
  m.requests = requests_.load(std::memory_order_relaxed);
  m.malformed_requests = malformed_.load(std::memory_order_relaxed);
  m.abandoned_operations = abandoned_.load(std::memory_order_relaxed);
  m.timer_pending_per_level = timer_->size_per_level();
  m.join = group_coordinator_->join_metrics();
  m.heartbeat = group_coordinator_->heartbeat_metrics();
  m.groups = group_coordinator_->stats();
  IdempotenceStats& i = m.idempotence;
  i.producer_ids_issued = producer_ids_issued_.load(std::memory_order_relaxed);
  i.transactional_refused = transactional_refused_.load(std::memory_order_relaxed);
  i.producer_states = producer_states_.load(std::memory_order_relaxed);
  i.producer_states_forgotten = producer_states_forgotten_.load(std::memory_order_relaxed);
  i.duplicate_batches = duplicate_batches_.load(std::memory_order_relaxed);
  i.out_of_order_batches = out_of_order_batches_.load(std::memory_order_relaxed);
  i.stale_epoch_batches = stale_epoch_batches_.load(std::memory_order_relaxed);
  i.unknown_producer_batches = unknown_producer_batches_.load(std::memory_order_relaxed);
  return m;
}

void Broker::log(std::string_view line) const {
  if (config_.log_sink) {
    config_.log_sink(line);
  } else {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  }
}

bool Broker::drop_this_produce_response() noexcept {
  const std::uint32_t every = config_.fault_drop_produce_response_every;
  return every != 0 && ++produce_responses_ % every == 0;
}

void Broker::event(std::string_view text) const {
  if (config_.on_event) config_.on_event(text);
  if (config_.verbose) log(text);
}

void Broker::handle_request(const std::shared_ptr<Connection>& conn, ByteView payload) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  Reader reader(payload);
  RequestHeader header;
  try {
    header = read_request_header(reader);
  } catch (const DecodeError& e) {
    note_malformed();
    log(fmt::format("conn {} {}: malformed request header, closing: {}", conn->id(), conn->peer(),
                    e.what()));
    conn->close("malformed request header");
    return;
  }
  const std::optional<VersionRange> api_range = codec_versions(ApiKey::api_versions);
  if (header.api_key == ApiKey::api_versions && !api_range->contains(header.api_version)) {
    // KIP-511: a client newer than us asks with a version we do not know. Answer in v0 with
    // UNSUPPORTED_VERSION and our table, so it retries with a version we speak.
    ApiVersionsResponse resp;
    resp.error_code = Errc::unsupported_version;
    resp.api_keys = broker_api_versions();
    const ResponseSlot slot = conn->open_slot(header);
    conn->respond(slot, encode_response(resp, 0, header.correlation_id),
                  "UNSUPPORTED_VERSION, answered in v0 so the client retries lower");
    return;
  }
  RequestBody body;
  try {
    body = decode_request_body(header, reader);
  } catch (const DecodeError& e) {
    // As Kafka: a request that cannot be parsed closes its connection; others are untouched.
    note_malformed();
    log(fmt::format("conn {} {}: malformed {} v{} request (corr={}), closing: {}", conn->id(),
                    conn->peer(), api_key_name(header.api_key), header.api_version,
                    header.correlation_id, e.what()));
    conn->close("malformed request");
    return;
  }
  const ResponseSlot slot = conn->open_slot(header);
  try {
    std::visit(
        [&](auto& req) {
          using T = std::decay_t<decltype(req)>;
          if constexpr (std::is_same_v<T, ApiVersionsRequest>) {
            handle_api_versions(slot, req);
          } else if constexpr (std::is_same_v<T, MetadataRequest>) {
            handle_metadata(slot, req);
          } else if constexpr (std::is_same_v<T, ListOffsetsRequest>) {
            handle_list_offsets(slot, req);
          } else if constexpr (std::is_same_v<T, ProduceRequest>) {
            handle_produce(slot, std::move(req));
          } else if constexpr (std::is_same_v<T, InitProducerIdRequest>) {
            handle_init_producer_id(slot, header, req);
          } else if constexpr (is_group_request_v<T>) {
            group_handler_->handle(slot, header, req);
          } else {
            static_assert(std::is_same_v<T, FetchRequest>);
            handle_fetch(slot, std::move(req));
          }
        },
        body);
  } catch (const std::exception& e) {
    // A bug or an exhausted resource while serving one request: that connection pays, the broker
    // goes on.
    log(fmt::format("conn {} {}: error serving {} v{} (corr={}), closing: {}", conn->id(),
                    conn->peer(), api_key_name(header.api_key), header.api_version,
                    header.correlation_id, e.what()));
    conn->close("internal error");
  }
}

void Broker::replicate(const TopicPartition& tp, std::int64_t log_end) {
  const auto& delays = config_.replication_delays;
  if (delays.empty()) return;  // no followers: append() already moved the HW
  for (std::size_t i = 0; i < delays.size(); ++i) {
    timer_->add(make_task([this, tp, i, log_end] { on_follower_caught_up(tp, i, log_end); }),
                delays[i]);
  }
}

void Broker::on_follower_caught_up(const TopicPartition& tp, std::size_t follower,
                                   std::int64_t offset) {
  if (stopped_) return;
  PartitionLog* pl = log_.find(tp.topic, tp.partition);
  if (pl == nullptr) return;
  const std::int64_t before = pl->high_watermark();
  const bool moved = pl->update_follower(follower, offset);
  event(fmt::format("follower {} replicated {}-{} up to offset {}", follower + 1, tp.topic,
                    tp.partition, offset));
  if (moved) on_high_watermark_advanced(tp, before, pl->high_watermark());
}

void Broker::on_high_watermark_advanced(const TopicPartition& tp, std::int64_t from,
                                        std::int64_t to) {
  event(fmt::format("high watermark of {}-{}: {} -> {}", tp.topic, tp.partition, from, to));
  // Kafka's checkAndComplete: only the operations watching this partition are looked at.
  fetch_purgatory_->check_and_complete(tp);
  produce_purgatory_->check_and_complete(tp);
}

}  // namespace purgatory::broker
