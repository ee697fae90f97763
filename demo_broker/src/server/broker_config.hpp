// BrokerConfig: everything the demo broker can be told on its command line, as one value.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "group/group_config.hpp"
#include "protocol/framing.hpp"

namespace purgatory::broker {

// A plain value type, thread-compatible. The callbacks are called on the broker's io thread.
struct BrokerConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 9092;  // 0: any free port (Broker::port() tells which)
  // The host clients are told to connect to (Metadata); empty: `host`, or 127.0.0.1 when `host`
  // is a wildcard address.
  std::string advertised_host;
  std::int32_t node_id = 1;
  std::string cluster_id = "purgatory-demo";
  std::int32_t partitions = 1;  // per topic, created on first use
  // One entry per simulated follower: how long after an append it has replicated it. Empty: no
  // followers, the high watermark follows the log end at once.
  std::vector<std::chrono::milliseconds> replication_delays{std::chrono::milliseconds(100),
                                                            std::chrono::milliseconds(100)};
  std::int32_t max_request_bytes = kDefaultMaxFrameBytes;  // Kafka's socket.request.max.bytes
  std::size_t retention_bytes = 64 * 1024 * 1024;          // per partition; 0: keep everything
  // Idempotent producers whose state each partition remembers (>= 1); beyond it the one that
  // appended least recently is forgotten (ProducerStateTable).
  std::size_t max_producers_per_partition = 1000;
  // A fault for tests and the demo: every Nth Produce response (counted over all connections)
  // is not sent; the connection is closed instead, after the append, as if the network had lost
  // the answer. 0: off.
  std::uint32_t fault_drop_produce_response_every = 0;
  // Kafka's fetch.max.bytes: a Fetch's max_bytes is capped at this (> 0), so no request can make
  // the broker build a bigger response, except that the first batch is still returned whole
  // (KIP-74) however big.
  std::int32_t fetch_max_bytes = 50 * 1024 * 1024;
  // Requests read from one connection but not yet answered; reading pauses beyond this (TCP
  // pushes back on the client) so a pipelining client cannot grow the broker's memory unbounded.
  std::size_t max_in_flight_per_connection = 64;
  // Prometheus endpoint (GET /metrics) on this host; empty: none. Port 0: any free port.
  std::string metrics_host;
  std::uint16_t metrics_port = 0;
  // The live view (GET / and /api/state, POST controls; docs/live-view.md) on this host; empty:
  // none. Port 0: any free port (Broker::ui_port() tells which).
  std::string ui_host;
  std::uint16_t ui_port = 0;
  // The live view's "play the demo" button: starts the scripted scenarios against this broker on
  // another thread and returns true, or returns false when they are already playing. Null: the
  // button answers 404. ui_demo_running tells the page whether they are playing.
  std::function<bool()> ui_play_demo;
  std::function<bool()> ui_demo_running;
  // What the first followers' replication delays are set to before the demo plays (its checks
  // rely on them); the demo needs at least this many followers.
  std::vector<std::chrono::milliseconds> ui_demo_replication_delays;
  bool verbose = false;  // one log line per request
  // Where log lines go (without a trailing newline); null: stderr.
  std::function<void(std::string_view line)> log_sink;
  // Told of log events worth a timeline (appends, follower catch-up, high watermark moves).
  std::function<void(std::string_view event)> on_event;
  // The consumer-group coordinator's settings (session timeout bounds, initial rebalance delay).
  GroupConfig groups;
};

}  // namespace purgatory::broker
