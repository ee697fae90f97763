// LiveView: the live view (demo_broker --ui HOST:PORT, docs/live-view.md). Its own
// StatusHttpServer on the broker's io thread serves the page, GET /api/state (everything the page
// shows, gathered as bounded snapshots) and the page's controls: a produce and a long-poll fetch
// built as real requests and handed to the same handlers as a client's, with a UiResponder that
// drops the answers (what the page parks is what kcat would park); the followers' replication
// delays; the scripted demo; and the in-process consumer-group members (LiveViewMembers). Every
// field is validated; a bad one answers 400 naming it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "log/log_store.hpp"
#include "observability/broker_metrics.hpp"
#include "observability/status_http_server.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "requests/logger.hpp"
#include "server/broker_config.hpp"
#include "server/live_view_members.hpp"

namespace purgatory::broker {

class FetchHandler;
class GroupCoordinator;
class OutcomeLog;
class ProduceHandler;
class Replication;
class UiResponder;

// Call only from the broker's io thread, except port(), which is thread-safe.
class LiveView {
 public:
  // What the page shows and drives: the broker's parts, which outlive the view.
  struct Parts {
    LogStore& log;
    std::shared_ptr<SystemTimer> timer;
    Replication& replication;
    ProduceHandler& produce;
    FetchHandler& fetch;
    GroupCoordinator& groups;
    const OutcomeLog& outcomes;
    const Logger& logger;
    std::function<BrokerMetrics()> metrics;  // also served as GET /metrics
    std::function<std::uint16_t()> kafka_port;
  };

  // Serves on config.ui_host:config.ui_port once started; `config` must outlive the view.
  LiveView(boost::asio::io_context& io, const BrokerConfig& config, Parts parts);
  ~LiveView();
  LiveView(const LiveView&) = delete;
  LiveView& operator=(const LiveView&) = delete;

  // Binds (port 0: any free port) and starts serving. Throws boost::system::system_error when it
  // cannot bind.
  void start();
  // Closes the listener and its connections, and completes the page's parked requests (they
  // write nothing). Idempotent.
  void stop();
  // Drops the in-process members without a LeaveGroup (the coordinator has shut down).
  void stop_members() { members_.clear(); }

  [[nodiscard]] std::uint16_t port() const noexcept { return server_.port(); }

  // The "play the demo" control (POST /api/demo), also how `--demo --ui` starts the demo: sets
  // the followers' delays the demo relies on and starts it, or answers why not (404 without the
  // demo, 409 when it cannot or is already playing).
  HttpReply play_demo();

 private:
  // GET /api/state?since=SEQ: the outcomes after SEQ, and everything else as it is now.
  [[nodiscard]] HttpReply state(const HttpRequest& req) const;
  [[nodiscard]] std::string state_json(std::uint64_t since_outcome) const;
  HttpReply produce(const HttpRequest& req);
  HttpReply fetch(const HttpRequest& req);
  HttpReply replication_delay(const HttpRequest& req);
  // 429 when the page already has UiResponder::kMaxParked requests waiting, else none.
  [[nodiscard]] std::optional<HttpReply> too_many_parked() const;
  void add_routes();

  const BrokerConfig& config_;
  Parts parts_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::shared_ptr<UiResponder> responder_;  // answers (discards) the page's requests
  LiveViewMembers members_;
  StatusHttpServer server_;
};

}  // namespace purgatory::broker
