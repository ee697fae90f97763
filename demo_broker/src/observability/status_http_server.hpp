// StatusHttpServer: the broker's HTTP/1.1 status endpoint (Boost.Beast): what it says about itself
// to people and to Prometheus. GET /metrics answers 200 with whatever `render` returns, in the text
// exposition format (version 0.0.4); the live view adds its page, GET /api/state and its controls
// with route(). Another path gets 404, another method 405. One request per connection (then
// "Connection: close"), at most kMaxSessions connections at once, each given kSessionTimeout to
// send its request and read the answer: a slow or hostile client costs one socket for a bounded
// time. The Broker runs one for --metrics, and the live view one for --ui.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace purgatory::broker {

// One request as a route handler sees it. A plain value.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  std::string query;   // after '?', undecoded ("" when none)
  std::string content_type;
  std::string body;  // at most StatusHttpServer::kMaxRequestBodyBytes
};

// A route handler's answer. A plain value.
struct HttpReply {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpReply(const HttpRequest&)>;

// Call only from the thread running `io` (render runs there too), except: the constructor and
// start() (before the io_context runs or on its thread), and port(), which is thread-safe.
// Errors: start() throws boost::system::system_error when it cannot bind.
class StatusHttpServer {
 public:
  static constexpr std::size_t kMaxSessions = 32;
  static constexpr std::chrono::seconds kSessionTimeout{10};
  static constexpr std::size_t kMaxRequestHeaderBytes = 8 * 1024;
  static constexpr std::size_t kMaxRequestBodyBytes = 8 * 1024;

  StatusHttpServer(boost::asio::io_context& io, std::function<std::string()> render);
  // stop().
  ~StatusHttpServer();
  StatusHttpServer(const StatusHttpServer&) = delete;
  StatusHttpServer& operator=(const StatusHttpServer&) = delete;

  // Serves `method` `path` (exact match) with `handler`, which runs on the io thread. Call before
  // start(). A handler that throws answers 500 with the exception's message.
  void route(std::string method, std::string path, HttpHandler handler);

  // Binds HOST:PORT (port 0: any free port, see port()) and starts accepting.
  void start(const std::string& host, std::uint16_t port);
  // Closes the listener and every open scrape connection. Idempotent.
  void stop();

  [[nodiscard]] std::uint16_t port() const noexcept { return port_.load(); }

  struct Shared;  // what sessions share with the server (render, routes, stopped), outliving it
  class Session;

 private:
  void accept();

  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<Shared> shared_;
  std::vector<std::weak_ptr<Session>> sessions_;
  std::atomic<std::uint16_t> port_{0};
};

}  // namespace purgatory::broker
