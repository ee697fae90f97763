// demo_broker: a single-node, in-memory Kafka broker whose waiting requests live in purgatories.
//   demo_broker                         serve on 127.0.0.1:9092 (Ctrl-C stops it)
//   demo_broker --listen 127.0.0.1:0    any free port, printed as "listening on 127.0.0.1:PORT"
//   demo_broker --demo                  the scripted demo, in-process; exits 0 when all went well
//   demo_broker --metrics 127.0.0.1:0   also serve Prometheus GET /metrics (port printed as
//                                       "metrics on http://127.0.0.1:PORT/metrics")
//   demo_broker --ui 127.0.0.1:8080     also serve the live view (printed as
//                                       "ui on http://127.0.0.1:8080/"); with --demo, the demo
//                                       plays slowly on it, then the broker keeps serving

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>

#include "demo/demo.hpp"
#include "server/broker.hpp"
#include "server/live_view.hpp"

namespace pb = purgatory::broker;

namespace {

// "HOST:PORT" (IPv6 as "[::1]:9092") given to `option`. Throws CLI::ValidationError.
void parse_endpoint(const std::string& option, const std::string& text, std::string& out_host,
                    std::uint16_t& out_port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) {
    throw CLI::ValidationError(option, "expected HOST:PORT, got '" + text + "'");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = text.substr(colon + 1);
  std::size_t used = 0;
  int value = -1;
  try {
    value = std::stoi(port, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != port.size() || value < 0 || value > 65535) {
    throw CLI::ValidationError(option, "port '" + port + "' is not in 0..65535");
  }
  out_host = host.empty() ? "127.0.0.1" : host;
  out_port = static_cast<std::uint16_t>(value);
}

// A host as it goes in a URL: IPv6 literals in brackets.
std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// --followers N with --replication-delay-ms D or D1,D2,...,DN.
void set_followers(int followers, const std::vector<int>& delays, pb::BrokerConfig& config) {
  if (followers < 0) throw CLI::ValidationError("--followers", "must be >= 0");
  for (const int d : delays) {
    if (d < 0) throw CLI::ValidationError("--replication-delay-ms", "delays must be >= 0");
  }
  if (delays.size() != 1 && delays.size() != static_cast<std::size_t>(followers)) {
    throw CLI::ValidationError(
        "--replication-delay-ms",
        fmt::format("give one delay for every follower, or one per follower ({} values), not {}",
                    followers, delays.size()));
  }
  config.replication_delays.clear();
  for (int i = 0; i < followers; ++i) {
    const int d = delays.size() == 1 ? delays[0] : delays[static_cast<std::size_t>(i)];
    config.replication_delays.emplace_back(d);
  }
}

// How much slower than `--demo` the scenarios play on the live view.
constexpr double kLiveDemoPace = 3.0;

// The live view's "play the demo" button: the scenarios on a thread of their own, one run at a
// time, each on fresh topics. Thread-safe.
class DemoPlayer {
 public:
  DemoPlayer() = default;
  DemoPlayer(const DemoPlayer&) = delete;
  DemoPlayer& operator=(const DemoPlayer&) = delete;
  ~DemoPlayer() {
    if (thread_.joinable()) thread_.join();
  }
  void target(std::string host, std::uint16_t port) {
    host_ = std::move(host);
    port_ = port;
  }
  // Call from one thread (the broker's io thread). False when a run is still playing.
  bool start() {
    bool idle = false;
    if (!running_.compare_exchange_strong(idle, true)) return false;
    if (thread_.joinable()) thread_.join();  // finished: running_ was cleared by its last step
    const int run = ++runs_;
    thread_ = std::thread([this, run] {
      (void)pb::play_demo_scenarios(host_, port_, kLiveDemoPace,
                                    run == 1 ? std::string() : fmt::format("-{}", run), stdout);
      running_ = false;
    });
    return true;
  }
  [[nodiscard]] bool running() const noexcept { return running_.load(); }

 private:
  std::string host_;
  std::uint16_t port_ = 0;
  int runs_ = 0;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

int serve(pb::BrokerConfig config, const std::string& port_file, bool play_demo_now) {
  boost::asio::io_context io;
  DemoPlayer player;
  if (!config.ui_host.empty()) {
    config.ui_play_demo = [&player] { return player.start(); };
    config.ui_demo_running = [&player] { return player.running(); };
    config.ui_demo_replication_delays.assign(std::begin(pb::kDemoFollowerDelays),
                                             std::end(pb::kDemoFollowerDelays));
  }
  pb::Broker broker(io, std::move(config));
  try {
    broker.start();
  } catch (const std::exception& e) {
    fmt::print(stderr, "demo_broker: cannot listen on {}:{}{}: {}\n", broker.config().host,
               broker.config().port,
               broker.config().metrics_host.empty()
                   ? std::string()
                   : fmt::format(" (metrics on {}:{})", broker.config().metrics_host,
                                 broker.config().metrics_port),
               e.what());
    return 1;
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    fmt::print(stderr, "demo_broker: signal {}, shutting down\n", signal);
    broker.stop();
    io.stop();
  });
  const auto& c = broker.config();
  fmt::print("listening on {}:{}\n", c.host, broker.port());
  if (broker.metrics_port() != 0) {
    fmt::print("metrics on http://{}:{}/metrics\n", c.metrics_host, broker.metrics_port());
  }
  if (broker.ui_port() != 0) {
    fmt::print("ui on http://{}:{}/\n", url_host(c.ui_host), broker.ui_port());
    player.target(c.host == "0.0.0.0" || c.host == "::" ? "127.0.0.1" : c.host, broker.port());
  }
  std::fflush(stdout);
  if (play_demo_now) {
    // Through the page's own path, on the io thread, once it runs.
    boost::asio::post(io, [&broker] { (void)broker.live_view()->play_demo(); });
  }
  if (!port_file.empty()) {
    // Written whole to a temporary name and renamed, so a reader never sees half a number.
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << broker.port() << '\n';
    std::rename(tmp.c_str(), port_file.c_str());
  }
  fmt::print(stderr,
             "demo_broker: node {}, {} partition(s) per topic, {} simulated follower(s), "
             "max request {} bytes, max fetch response {} bytes{}{}\n",
             c.node_id, c.partitions, c.replication_delays.size(), c.max_request_bytes,
             c.fetch_max_bytes, c.verbose ? ", verbose" : "",
             c.fault_drop_produce_response_every == 0
                 ? std::string()
                 : fmt::format(", FAULT: every {} produce response(s) dropped",
                               c.fault_drop_produce_response_every));
  io.run();
  return 0;
}

// What the command line says, before it is checked and turned into a BrokerConfig.
struct CommandLine {
  pb::BrokerConfig config;
  std::string listen = "127.0.0.1:9092";
  int followers = 2;
  std::vector<int> delays{100};
  int initial_rebalance_delay_ms = static_cast<int>(config.groups.initial_rebalance_delay.count());
  int min_session_timeout_ms = static_cast<int>(config.groups.min_session_timeout.count());
  int max_session_timeout_ms = static_cast<int>(config.groups.max_session_timeout.count());
  std::string port_file;
  std::string metrics;
  std::string ui;
  bool demo = false;
};

// The options of the Kafka side: where it listens, its topics and followers, its limits.
void add_broker_options(CLI::App& app, CommandLine& cl) {
  pb::BrokerConfig& config = cl.config;
  app.add_option("--listen", cl.listen,
                 "HOST:PORT to listen on; port 0 picks a free port (printed on stdout as "
                 "\"listening on HOST:PORT\")")
      ->capture_default_str();
  app.add_option("--partitions", config.partitions,
                 "partitions of each topic, created on first use (Produce or Metadata)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--followers", cl.followers,
                 "simulated followers; the high watermark is the smallest offset all of them "
                 "replicated, and acks=-1 produces wait for it")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--replication-delay-ms", cl.delays,
                 "how long after an append each follower has replicated it: one value for all, "
                 "or a comma list with one per follower (e.g. 50,2000)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--max-request-bytes", config.max_request_bytes,
                 "largest request frame accepted; bigger ones close the connection before any "
                 "memory is allocated for them (Kafka's socket.request.max.bytes)")
      ->capture_default_str()
      ->check(CLI::Range(pb::kMinRequestFrameBytes, std::numeric_limits<std::int32_t>::max()));
  app.add_option("--fetch-max-bytes", config.fetch_max_bytes,
                 "largest Fetch response: a request's max_bytes is capped at this, except that "
                 "the first batch is always returned whole (Kafka's fetch.max.bytes)")
      ->capture_default_str()
      ->check(CLI::Range(1, std::numeric_limits<std::int32_t>::max()));
  app.add_option("--retention-bytes", config.retention_bytes,
                 "per partition: beyond this the oldest replicated batches are dropped (0 keeps "
                 "everything)")
      ->capture_default_str();
  app.add_option("--max-producers-per-partition", config.max_producers_per_partition,
                 "idempotent producers whose state (epoch, last 5 batches) each partition keeps "
                 "to recognise their retries; beyond it the one idle longest is forgotten, and "
                 "its next batch gets UNKNOWN_PRODUCER_ID unless it starts at sequence 0")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}));
  app.add_option("--fault-drop-produce-response", config.fault_drop_produce_response_every,
                 "a fault for tests and demos: every Nth Produce response (counted over all "
                 "connections) is not sent; the connection is closed instead, after the records "
                 "were appended, as if the network had lost the answer. Idempotent producers "
                 "retry and are answered with their first attempt's offsets (0: off)")
      ->capture_default_str();
  app.add_option("--node-id", config.node_id, "this broker's node id in Metadata")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<std::int32_t>::max()));
  app.add_option("--advertised-host", config.advertised_host,
                 "host given to clients in Metadata (default: the listen host, or 127.0.0.1 for "
                 "a wildcard address)");
}

// The consumer-group coordinator's options.
void add_group_options(CLI::App& app, CommandLine& cl) {
  app.add_option("--group-initial-rebalance-delay-ms", cl.initial_rebalance_delay_ms,
                 "how long an empty consumer group's first join phase waits for more members, "
                 "and again each time one arrives (Kafka's group.initial.rebalance.delay.ms)")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<std::int32_t>::max()));
  app.add_option("--group-min-session-timeout-ms", cl.min_session_timeout_ms,
                 "shortest session timeout a consumer may ask for in JoinGroup, else "
                 "INVALID_SESSION_TIMEOUT (Kafka's group.min.session.timeout.ms)")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<std::int32_t>::max()));
  app.add_option("--group-max-session-timeout-ms", cl.max_session_timeout_ms,
                 "longest session timeout a consumer may ask for (Kafka's "
                 "group.max.session.timeout.ms)")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<std::int32_t>::max()));
}

// What it shows and how it runs: the port file, metrics, the live view, the log, the demo.
void add_output_options(CLI::App& app, CommandLine& cl) {
  app.add_option("--port-file", cl.port_file,
                 "also write the bound port to this file once listening (for scripts)");
  app.add_option("--metrics", cl.metrics,
                 "HOST:PORT to serve Prometheus metrics on (GET /metrics); port 0 picks a free "
                 "port (printed on stdout as \"metrics on http://HOST:PORT/metrics\"). Also with "
                 "--demo");
  app.add_option("--ui", cl.ui,
                 "HOST:PORT to serve the live view on: a page showing the purgatories' waiting "
                 "requests, the timing wheel and each outcome as it happens, with buttons to try "
                 "it (port 0 picks a free port, printed on stdout as \"ui on "
                 "http://HOST:PORT/\"). With --demo the scenarios play slowly on it, then the "
                 "broker keeps serving until Ctrl-C");
  app.add_flag("-v,--verbose", cl.config.verbose,
               "log one line per request (api, version, correlation id, client, outcome, time "
               "waited) and every follower/high-watermark move");
  app.add_flag("--demo", cl.demo,
               "run the scripted demo against an in-process broker on a free port, then exit (0 "
               "when every scenario behaved as expected)");
}

// Checks what the options say together and puts it in cl.config. Throws CLI::ValidationError.
void finish(CommandLine& cl) {
  pb::BrokerConfig& config = cl.config;
  parse_endpoint("--listen", cl.listen, config.host, config.port);
  if (!cl.metrics.empty()) {
    parse_endpoint("--metrics", cl.metrics, config.metrics_host, config.metrics_port);
  }
  if (!cl.ui.empty()) parse_endpoint("--ui", cl.ui, config.ui_host, config.ui_port);
  set_followers(cl.followers, cl.delays, config);
  if (cl.min_session_timeout_ms > cl.max_session_timeout_ms) {
    throw CLI::ValidationError("--group-min-session-timeout-ms",
                               fmt::format("{} is above --group-max-session-timeout-ms {}",
                                           cl.min_session_timeout_ms, cl.max_session_timeout_ms));
  }
  config.groups.initial_rebalance_delay = std::chrono::milliseconds(cl.initial_rebalance_delay_ms);
  config.groups.min_session_timeout = std::chrono::milliseconds(cl.min_session_timeout_ms);
  config.groups.max_session_timeout = std::chrono::milliseconds(cl.max_session_timeout_ms);
}

// serve(), with a start-up failure (a bad value, a port in use) told on stderr.
int serve_or_report(pb::BrokerConfig config, const std::string& port_file, bool play_demo_now) {
  try {
    return serve(std::move(config), port_file, play_demo_now);
  } catch (const std::exception& e) {
    fmt::print(stderr, "demo_broker: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "demo_broker: a single-node, in-memory Kafka broker (a subset of the wire protocol) whose "
      "waiting Fetch and acks=-1 Produce requests live in purgatories, so you can watch them "
      "complete early or time out with kcat, kafka-python or confluent-kafka; consumer groups "
      "rebalance through a join purgatory and expire through a heartbeat purgatory."};
  CommandLine cl;
  add_broker_options(app, cl);
  add_group_options(app, cl);
  add_output_options(app, cl);
  try {
    app.parse(argc, argv);
    finish(cl);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  pb::BrokerConfig& config = cl.config;
  if (cl.demo && !config.ui_host.empty()) {
    // The demo on the live view: a broker on a free port with the demo's followers, playing the
    // scenarios slowly once the page can be opened, then serving until Ctrl-C.
    if (cl.listen == "127.0.0.1:9092") config.port = 0;
    config.replication_delays.assign(std::begin(pb::kDemoFollowerDelays),
                                     std::end(pb::kDemoFollowerDelays));
    return serve_or_report(std::move(config), cl.port_file, true);
  }
  if (cl.demo) {
    return pb::run_demo(
        pb::DemoOptions{config.verbose, argv[0], config.metrics_host, config.metrics_port}, stdout);
  }
  return serve_or_report(std::move(config), cl.port_file, false);
}
