// Broker: the demo broker's server. An Asio TCP acceptor, the in-memory LogStore, simulated
// followers, two purgatories (Kafka's DelayedFetch and DelayedProduce) and the consumer-group
// coordinator with its own two (DelayedJoin, DelayedHeartbeat), all sharing one timer driven by
// the io_context itself (an AsioTimer): no timer thread, no lock around
// broker state, because every handler, completion and expiration runs on the one thread that
// runs the io_context.
//
//   boost::asio::io_context io;
//   purgatory::broker::Broker broker(io, config);
//   broker.start();                  // binds; port() tells the port when config.port was 0
//   io.run();                        // until something calls broker.stop() and io.stop()
//
// A request flows: Connection reads a frame -> handle_request() decodes it -> a handler answers
// at once or parks a delayed operation in a purgatory -> the answer fills the connection's
// response slot, and the connection writes responses strictly in request order.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "purgatory/broker/broker_config.hpp"
#include "purgatory/broker/broker_metrics.hpp"
#include "purgatory/broker/codec.hpp"
#include "purgatory/broker/log_store.hpp"
#include "purgatory/broker/topic_partition.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "purgatory/timer/asio.hpp"

namespace purgatory::broker {

class Connection;
class GroupCoordinator;
class GroupHandler;
class InProcessMember;
struct LiveState;
class MetricsServer;
class OutcomeLog;
class UiResponder;
struct HttpReply;
struct HttpRequest;
struct ResponseSlot;

using Purgatory = DelayedOperationPurgatory<TopicPartition, TopicPartitionHash>;

// Call only from the io thread, except: the constructor and start() (before the io_context runs
// or on its thread), and port(), metrics_port() and metrics(), which are thread-safe. Errors:
// start() throws boost::system::system_error when it cannot bind (either port); bad requests
// never throw out of the broker (they get a Kafka error code, or their connection closed with a
// log line).
class Broker {
 public:
  // Throws std::invalid_argument, naming the value, for a config it cannot run (partitions < 1,
  // a negative or too-small max_request_bytes, fetch_max_bytes <= 0,
  // max_in_flight_per_connection == 0).
  Broker(boost::asio::io_context& io, BrokerConfig config);
  // stop(). Call on the io thread, or after the io_context stopped running.
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Binds the listening socket and starts accepting connections; also the Prometheus endpoint
  // (MetricsServer, on this io_context) when config.metrics_host is set.
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

  // The live view's "play the demo" control (POST /api/demo), also used by `--demo --ui` to start
  // the demo at once. Call on the io thread.
  HttpReply handle_ui_demo_request(const HttpRequest& req);

  // ---- for Connection ---------------------------------------------------------------------
  // One complete request frame payload (after the size prefix).
  void handle_request(const std::shared_ptr<Connection>& conn, ByteView payload);
  void on_connection_closed(std::uint64_t id, std::size_t abandoned_operations);
  void note_malformed() noexcept { malformed_.fetch_add(1, std::memory_order_relaxed); }
  void log(std::string_view line) const;
  [[nodiscard]] bool verbose() const noexcept { return config_.verbose; }
  // The --fault-drop-produce-response fault: true when the Produce response about to be sent is
  // the one to drop (every Nth; never when the fault is off).
  [[nodiscard]] bool drop_this_produce_response() noexcept;

 private:
  void accept();
  void handle_api_versions(const ResponseSlot& slot, const ApiVersionsRequest& req);
  void handle_metadata(const ResponseSlot& slot, const MetadataRequest& req);
  void handle_list_offsets(const ResponseSlot& slot, const ListOffsetsRequest& req);
  void handle_produce(const ResponseSlot& slot, ProduceRequest req);
  void handle_init_producer_id(const ResponseSlot& slot, const RequestHeader& header,
                               const InitProducerIdRequest& req);
  // The error for a valid batch Kafka's idempotence rules refuse before the log is asked (a
  // transaction, a control batch, an idempotent batch without epoch or sequence), or none.
  Errc check_producer(const ProduceRequest& req, const RecordSetInfo& info, std::string& why) const;
  // Appends one partition's validated batch (idempotence checked in the log), counting and
  // logging what became of it; the Kafka error for the partition, `why` filled for a refusal.
  AppendResult append_batch(const TopicPartition& tp, PartitionLog& log, Bytes batch,
                            const RecordSetInfo& info);
  void handle_fetch(const ResponseSlot& slot, FetchRequest req);
  // Schedules each follower's catch-up to `log_end` of `tp`.
  void replicate(const TopicPartition& tp, std::int64_t log_end);
  void on_follower_caught_up(const TopicPartition& tp, std::size_t follower, std::int64_t offset);
  // Wakes the fetches and produces waiting on `tp`.
  void on_high_watermark_advanced(const TopicPartition& tp, std::int64_t from, std::int64_t to);
  void event(std::string_view text) const;

  // ---- the live view (server/live_view.cpp) -------------------------------------------------
  void start_live_view();
  // GET /api/state?since=SEQ: the outcomes after SEQ, and everything else as it is now.
  [[nodiscard]] std::string live_state_json(std::uint64_t since_outcome) const;
  HttpReply ui_state(const HttpRequest& req) const;
  HttpReply ui_produce(const HttpRequest& req);
  HttpReply ui_fetch(const HttpRequest& req);
  HttpReply ui_replication_delay(const HttpRequest& req);
  // ---- the live view's group controls (server/live_view_groups.cpp) --------------------------
  // The groups (with the join and heartbeat purgatories' snapshots) and the in-process members.
  void add_live_groups(LiveState& state) const;
  HttpReply ui_member_start(const HttpRequest& req);
  HttpReply ui_member_stop(const HttpRequest& req);
  HttpReply ui_member_freeze(const HttpRequest& req, bool freeze);

  boost::asio::io_context& io_;
  BrokerConfig config_;
  std::string advertised_host_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<std::uint16_t> port_{0};
  LogStore log_;
  std::shared_ptr<SystemTimer> timer_;
  std::unique_ptr<Purgatory> fetch_purgatory_;
  std::unique_ptr<Purgatory> produce_purgatory_;
  std::unique_ptr<MetricsServer> metrics_server_;  // null without config.metrics_host
  std::unique_ptr<MetricsServer> ui_server_;       // null without config.ui_host
  std::unique_ptr<OutcomeLog> outcomes_;           // parked requests' outcomes, for the live view
  std::shared_ptr<UiResponder> ui_responder_;      // answers (discards) the live view's requests
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::unique_ptr<GroupCoordinator> group_coordinator_;
  std::unique_ptr<GroupHandler> group_handler_;  // the group apis' dispatch
  // The live view's in-process members, at most kMaxUiMembers; destroyed before the coordinator.
  std::vector<std::shared_ptr<InProcessMember>> ui_members_;
  std::uint64_t ui_members_started_ = 0;
  std::unordered_map<std::uint64_t, std::shared_ptr<Connection>> connections_;
  std::uint64_t next_connection_id_ = 0;
  bool stopped_ = false;

  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> open_{0};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> malformed_{0};
  std::atomic<std::uint64_t> abandoned_{0};
  std::uint64_t produce_responses_ = 0;  // counted for the produce-response fault

  // Producer ids: handed out in order from the broker's start time in milliseconds, so an id of
  // an earlier run of the broker (whose log is gone with it) is one this run never issued.
  std::int64_t first_producer_id_ = 0;
  std::int64_t next_producer_id_ = 0;
  std::atomic<std::uint64_t> producer_ids_issued_{0};
  std::atomic<std::uint64_t> transactional_refused_{0};
  std::atomic<std::uint64_t> producer_states_{0};
  std::atomic<std::uint64_t> producer_states_forgotten_{0};
  std::atomic<std::uint64_t> duplicate_batches_{0};
  std::atomic<std::uint64_t> out_of_order_batches_{0};
  std::atomic<std::uint64_t> stale_epoch_batches_{0};
  std::atomic<std::uint64_t> unknown_producer_batches_{0};
};

}  // namespace purgatory::broker
