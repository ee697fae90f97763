#include "observability/status_http_server.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace purgatory::broker {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using boost::asio::ip::tcp;

namespace {
constexpr std::string_view kPlain = "text/plain; charset=utf-8";
constexpr std::string_view kExposition = "text/plain; version=0.0.4; charset=utf-8";
}  // namespace

struct StatusHttpServer::Shared {
  struct Route {
    std::string method;
    std::string path;
    HttpHandler handler;
  };
  std::function<std::string()> render;
  std::vector<Route> routes;
  bool stopped = false;  // set by stop(): no handler renders afterwards
};

// One scrape: read a request, answer it, close.
class StatusHttpServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)) {
    parser_.header_limit(static_cast<std::uint32_t>(kMaxRequestHeaderBytes));
    parser_.body_limit(kMaxRequestBodyBytes);  // read (and dropped), so closing resets nothing
  }

  void start() {
    stream_.expires_after(kSessionTimeout);
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec || shared_->stopped) return;  // timeout, reset, garbage, or shutting down: drop it
    const auto& req = parser_.get();
    response_.version(req.version());
    response_.keep_alive(false);
    response_.set(http::field::server, "demo_broker");
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/metrics") {
      if (req.method() != http::verb::get) {
        response_.set(http::field::allow, "GET");
        respond(http::status::method_not_allowed, kPlain, "only GET is allowed on /metrics\n");
      } else {
        respond(http::status::ok, kExposition, shared_->render());
      }
      return;
    }
    const std::string_view method(req.method_string().data(), req.method_string().size());
    std::string allowed;
    for (const Shared::Route& r : shared_->routes) {
      if (r.path != path) continue;
      if (r.method == method) {
        serve(r.handler, target, path);
        return;
      }
      allowed += (allowed.empty() ? "" : ", ") + r.method;
    }
    if (!allowed.empty()) {
      response_.set(http::field::allow, allowed);
      respond(http::status::method_not_allowed, kPlain,
              fmt::format("{} is not allowed on {}: use {}\n", method, path, allowed));
      return;
    }
    std::string paths = "/metrics";
    for (const Shared::Route& r : shared_->routes)
      paths += ", " + r.method + " " + r.path;
    respond(http::status::not_found, kPlain, fmt::format("not found: {} (try {})\n", path, paths));
  }

  void serve(const HttpHandler& handler, std::string_view target, std::string_view path) {
    const auto& req = parser_.get();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.path = std::string(path);
    if (const auto q = target.find('?'); q != std::string_view::npos) {
      request.query = std::string(target.substr(q + 1));
    }
    request.content_type = std::string(req[http::field::content_type]);
    request.body = req.body();
    HttpReply reply;
    try {
      reply = handler(request);
    } catch (const std::exception& e) {
      reply = HttpReply{500, std::string(kPlain), fmt::format("internal error: {}\n", e.what())};
    }
    response_.set(http::field::cache_control, "no-store");
    respond(static_cast<http::status>(reply.status), reply.content_type, std::move(reply.body));
  }

  void respond(http::status status, std::string_view content_type, std::string body) {
    response_.result(status);
    response_.set(http::field::content_type,
                  beast::string_view(content_type.data(), content_type.size()));
    response_.body() = std::move(body);
    response_.prepare_payload();
    stream_.expires_after(kSessionTimeout);
    http::async_write(
        stream_, response_,
        [self = shared_from_this()](beast::error_code, std::size_t) { self->close(); });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{kMaxRequestHeaderBytes};
  http::request_parser<http::string_body> parser_;
  http::response<http::string_body> response_;
  std::shared_ptr<Shared> shared_;
};

StatusHttpServer::StatusHttpServer(boost::asio::io_context& io, std::function<std::string()> render)
    : acceptor_(io), shared_(std::make_shared<Shared>()) {
  shared_->render = std::move(render);
}

void StatusHttpServer::route(std::string method, std::string path, HttpHandler handler) {
  shared_->routes.push_back({std::move(method), std::move(path), std::move(handler)});
}

StatusHttpServer::~StatusHttpServer() {
  stop();
}

void StatusHttpServer::start(const std::string& host, std::uint16_t port) {
  const tcp::endpoint endpoint(boost::asio::ip::make_address(host), port);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
  port_.store(acceptor_.local_endpoint().port());
  accept();
}

void StatusHttpServer::accept() {
  acceptor_.async_accept([this, shared = shared_](beast::error_code ec, tcp::socket socket) {
    // `shared` keeps the flag alive: a handler aborted by stop() may run after the server died.
    if (shared->stopped || ec == boost::asio::error::operation_aborted) return;
    if (!ec) {
      std::erase_if(sessions_, [](const std::weak_ptr<Session>& s) { return s.expired(); });
      if (sessions_.size() < kMaxSessions) {
        auto session = std::make_shared<Session>(std::move(socket), shared_);
        sessions_.push_back(session);
        session->start();
      }  // else: `socket` closes here; the scraper retries at its next interval
    }
    accept();
  });
}

void StatusHttpServer::stop() {
  if (shared_->stopped) return;
  shared_->stopped = true;
  beast::error_code ignored;
  acceptor_.close(ignored);
  for (const auto& weak : sessions_) {
    if (const auto session = weak.lock()) session->close();
  }
  sessions_.clear();
}

}  // namespace purgatory::broker
