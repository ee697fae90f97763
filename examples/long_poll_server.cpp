// A long-poll HTTP endpoint on Boost.Beast: each parked request is a DelayedOperation in a
// purgatory, awaited with co_await, and a client that hangs up withdraws its operation.
//
//   GET  /wait?key=K&timeout_ms=T   the next value published on K, or "timeout" after T ms
//   POST /publish?key=K&value=V     publishes V (or, without a value parameter, the request body)
//                                   on K; answers how many waits it completed
//   GET  /stats                     the purgatory's and the server's counters, "name value" lines
//
// HTTP/1.1 with keep-alive: a connection serves its requests one after the other, a wait included
// (HTTP/1.0, or "Connection: close", closes after the answer). Beast parses each request; query
// parameters are percent-decoded ('+' is a space). A bad request gets 400 and a body naming the
// problem (an unknown or repeated parameter, a missing key, a timeout that is not a number of
// milliseconds in [0, 60000], a broken %-escape, a malformed request); an unknown path 404, a
// known path with the wrong method 405.
//
// While a wait is parked the connection keeps reading: bytes of a pipelined request are kept for
// later, and the end of the stream (the client hung up) emits the wait's cancellation slot, which
// cancels the operation: it leaves its key at once, long before its timeout, and counts in the
// purgatory's cancelled total.
//
// One thread runs everything: the purgatory's timer is an AsioTimer, which runs on the io_context
// (its expirations are handlers there), so no lock is ever contended.
//
//   long_poll_server [--port N]   serves on 127.0.0.1:N (default 0: the OS picks; the first line
//                                 printed says which), logging each request's outcome
//   SIGINT or SIGTERM             stops: parked waits answer "shutting down", connections close,
//                                 the last line printed holds the counters, exit status 0
//
//   curl -s 'http://127.0.0.1:PORT/wait?key=news&timeout_ms=30000' &
//   curl -s -X POST 'http://127.0.0.1:PORT/publish?key=news&value=hello%20world'   # prints 1

#include <fmt/core.h>
#include <boost/asio/io_context.hpp>
#include <boost/version.hpp>

#if defined(BOOST_ASIO_HAS_CO_AWAIT)

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "purgatory/asio.hpp"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr long kMaxTimeoutMs = 60'000;
constexpr std::size_t kMaxBodyBytes = 64 * 1024;

// The latest value published on each key, numbered so that a wait knows whether it came after the
// wait began. Used on the io_context's thread only.
class Mailbox {
 public:
  struct Entry {
    std::uint64_t sequence = 0;
    std::string value;
  };
  [[nodiscard]] Entry latest(const std::string& key) const {
    const auto it = entries_.find(key);
    return it == entries_.end() ? Entry{} : it->second;
  }
  void publish(const std::string& key, std::string value) {
    Entry& e = entries_[key];
    ++e.sequence;
    e.value = std::move(value);
  }

 private:
  std::map<std::string, Entry> entries_;
};

// A parked GET /wait: completes once `key` has a value published after the request arrived.
// Its callbacks run on the io_context's thread, as everything here.
class WaitForPublish final : public purgatory::DelayedOperation {
 public:
  WaitForPublish(const Mailbox& mailbox, std::string key, std::chrono::milliseconds timeout)
      : DelayedOperation(timeout),
        mailbox_(mailbox),
        key_(std::move(key)),
        seen_(mailbox.latest(key_).sequence) {}

  // The value that completed it; read once the wait has completed.
  [[nodiscard]] const std::string& value() const { return value_; }

 protected:
  bool try_complete() override {
    Mailbox::Entry e = mailbox_.latest(key_);
    if (e.sequence == seen_) return false;
    value_ = std::move(e.value);
    return true;  // the awaiting coroutine answers
  }

 private:
  const Mailbox& mailbox_;
  const std::string key_;
  const std::uint64_t seen_;
  std::string value_;  // written under the operation's lock, before the outcome
};

// Everything the connections share. Used on the io_context's thread only.
struct Server {
  Server(asio::io_context& io, std::uint16_t port)
      : timer(io, {.name = "long-poll"}),
        waits(timer, {.name = "waits"}),
        acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), port)) {}

  purgatory::AsioTimer timer;
  purgatory::DelayedOperationPurgatory<std::string> waits;
  Mailbox mailbox;
  tcp::acceptor acceptor;
  std::set<tcp::socket*> sockets;  // open connections, closed by stop()
  bool stopping = false;
  std::uint64_t connections = 0;   // accepted so far
  std::uint64_t requests = 0;      // answered so far
  std::uint64_t bad_requests = 0;  // answered 400

  [[nodiscard]] std::string counters() const {
    const auto m = waits.metrics();
    return fmt::format(
        "waiting {}\ncompleted {}\nexpired {}\nwithdrawn {}\nshut_down {}\nconnections {}\n"
        "requests {}\nbad_requests {}\n",
        m.delayed, m.completed_total, m.expired_total, m.cancelled_total, m.shut_down_total,
        connections, requests, bad_requests);
  }

  // SIGINT/SIGTERM: no more connections, every parked wait gets Outcome::shut_down, and every
  // connection stops reading (each closes after its answer, if it owes one).
  void stop() {
    stopping = true;
    acceptor.close();
    waits.shutdown();
    for (tcp::socket* socket : sockets) {
      error_code ignored;
      socket->cancel(ignored);
    }
  }
};

template <class... Args>
void log(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print("{}\n", fmt::format(format, std::forward<Args>(args)...));
  std::fflush(stdout);
}

// ---- request parsing ---------------------------------------------------------------------------

// A request's answer: its status and body (the reason, for an error).
struct Answer {
  http::status status = http::status::ok;
  std::string body;
  const char* allow = nullptr;  // for 405: the method the path takes
};

Answer bad_request(std::string reason) {
  return {http::status::bad_request, std::move(reason) + "\n", {}};
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded decoding: "%xx" is the byte 0xxx, '+' a space. Nothing when
// a '%' is not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] != '%') {
      out += in[i];
    } else {
      if (i + 2 >= in.size()) return std::nullopt;
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

using Params = std::map<std::string, std::string, std::less<>>;

// The query's parameters, decoded, each of them one of `allowed`; or the 400 naming what is wrong.
std::variant<Params, Answer> parse_query(std::string_view query,
                                         std::initializer_list<std::string_view> allowed) {
  Params params;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::optional<std::string> name = percent_decode(pair.substr(0, eq));
    const std::optional<std::string> value =
        percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!name || !value) {
      return bad_request(fmt::format("bad %-escape in the query parameter '{}'", pair));
    }
    if (std::find(allowed.begin(), allowed.end(), *name) == allowed.end()) {
      return bad_request(fmt::format("unknown query parameter '{}'", *name));
    }
    if (!params.emplace(*name, *value).second) {
      return bad_request(fmt::format("query parameter '{}' given twice", *name));
    }
  }
  return params;
}

// ---- a parked wait -----------------------------------------------------------------------------

// Keeps reading a connection while its request is parked: what the client sends meanwhile (a
// pipelined request) stays in `buffer` for later; the end of the stream, or a reset, means it hung
// up, and emits `hung_up`. finish() stops the read and returns once its handler has run.
class HangUpWatch {
 public:
  HangUpWatch(tcp::socket& socket, boost::beast::flat_buffer& buffer,
              asio::cancellation_signal& hung_up)
      : socket_(socket), buffer_(buffer), hung_up_(hung_up), done_(socket.get_executor()) {
    done_.expires_at(asio::steady_timer::time_point::max());
    read();
  }

  awaitable<void> finish() {
    error_code ignored;
    socket_.cancel(ignored);
    if (!reading_) co_return;
    co_await done_.async_wait(asio::redirect_error(use_awaitable, ignored));
  }

 private:
  void read() {
    if (buffer_.size() >= kMaxBodyBytes) {  // a client pipelining that much: stop watching
      reading_ = false;
      return;
    }
    reading_ = true;
    socket_.async_read_some(buffer_.prepare(4096), [this](error_code ec, std::size_t n) {
      buffer_.commit(n);
      if (!ec) {
        read();
        if (reading_) return;
      } else if (ec != asio::error::operation_aborted) {
        hung_up_.emit(asio::cancellation_type::terminal);  // nothing if it answered meanwhile
      }
      reading_ = false;
      done_.cancel();
    });
  }

  tcp::socket& socket_;
  boost::beast::flat_buffer& buffer_;
  asio::cancellation_signal& hung_up_;  // used on the io_context's thread, as everything here
  asio::steady_timer done_;             // cancelled when the read ends: finish() waits on it
  bool reading_ = false;
};

// Parks GET /wait in the purgatory until a publish, the timeout, or the client hanging up.
// Nothing when the client hung up (the operation was cancelled: nobody to answer).
awaitable<std::optional<Answer>> long_poll(Server& server, tcp::socket& socket,
                                           boost::beast::flat_buffer& buffer, std::string key,
                                           std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  const auto op = purgatory::make_operation<WaitForPublish>(server.mailbox, key, timeout);
  asio::cancellation_signal hung_up;
  HangUpWatch watch(socket, buffer, hung_up);
  error_code ec;
  const purgatory::Outcome outcome = co_await server.waits.async_watch(
      op, key,
      asio::bind_cancellation_slot(hung_up.slot(), asio::redirect_error(use_awaitable, ec)));
  co_await watch.finish();

  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  if (ec) {
    log("wait key={}: cancelled after {} ms: the client hung up", key, waited.count());
    co_return std::nullopt;
  }
  log("wait key={}: {} after {} ms", key, purgatory::to_string(outcome), waited.count());
  switch (outcome) {
    case purgatory::Outcome::completed:
      co_return Answer{http::status::ok, op->value(), {}};
    case purgatory::Outcome::expired:
      co_return Answer{http::status::ok, "timeout", {}};
    default:
      co_return Answer{http::status::service_unavailable, "shutting down\n", {}};
  }
}

// ---- the endpoints ------------------------------------------------------------------------------

awaitable<std::optional<Answer>> answer(Server& server, tcp::socket& socket,
                                        boost::beast::flat_buffer& buffer,
                                        const http::request<http::string_body>& req) {
  const std::string_view target(req.target().data(), req.target().size());
  const std::size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);

  if (path == "/stats") {
    if (req.method() != http::verb::get)
      co_return Answer{http::status::method_not_allowed, "use GET\n", "GET"};
    co_return Answer{http::status::ok, server.counters(), {}};
  }
  const bool wait = path == "/wait";
  if (!wait && path != "/publish") {
    co_return Answer{http::status::not_found, fmt::format("no such endpoint: {}\n", path), {}};
  }
  const http::verb method = wait ? http::verb::get : http::verb::post;
  if (req.method() != method) {
    const char* name = wait ? "GET" : "POST";
    co_return Answer{http::status::method_not_allowed, fmt::format("use {} for {}\n", name, path),
                     name};
  }

  auto parsed =
      wait ? parse_query(query, {"key", "timeout_ms"}) : parse_query(query, {"key", "value"});
  if (auto* error = std::get_if<Answer>(&parsed)) co_return std::move(*error);
  Params& params = std::get<Params>(parsed);
  const auto key = params.find("key");
  if (key == params.end() || key->second.empty()) {
    co_return bad_request("the query parameter 'key' is required (a non-empty string)");
  }

  if (!wait) {
    const auto value = params.find("value");
    server.mailbox.publish(key->second, value == params.end() ? req.body() : value->second);
    const std::size_t completed = server.waits.check_and_complete(key->second);
    log("publish key={}: completed {} wait(s)", key->second, completed);
    co_return Answer{http::status::ok, std::to_string(completed), {}};
  }

  const auto t = params.find("timeout_ms");
  if (t == params.end()) co_return bad_request("the query parameter 'timeout_ms' is required");
  long timeout_ms = -1;
  const std::string& text = t->second;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), timeout_ms);
  if (error != std::errc() || end != text.data() + text.size() || timeout_ms < 0 ||
      timeout_ms > kMaxTimeoutMs) {
    co_return bad_request(fmt::format(
        "timeout_ms '{}' is not a whole number of milliseconds in [0, {}]", text, kMaxTimeoutMs));
  }
  co_return co_await long_poll(server, socket, buffer, key->second,
                               std::chrono::milliseconds(timeout_ms));
}

// One connection: requests read and answered in turn while it is kept alive.
awaitable<void> serve(Server& server, tcp::socket socket) {
  server.sockets.insert(&socket);
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(kMaxBodyBytes);
    error_code ec;
    co_await http::async_read(socket, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
        server.stopping) {
      break;  // the client closed between requests, or the server stops
    }
    std::optional<Answer> reply;
    bool keep_alive = false;
    unsigned version = 11;
    if (ec) {  // not HTTP, or over a limit: answer and close (the stream cannot be resynchronized)
      reply = bad_request(fmt::format("malformed request: {}", ec.message()));
    } else {
      const http::request<http::string_body>& req = parser.get();
      keep_alive = req.keep_alive();
      version = req.version();
      reply = co_await answer(server, socket, buffer, req);
      if (!reply) break;  // the client hung up while parked
    }
    if (reply->status == http::status::bad_request) {
      ++server.bad_requests;
      log("400: {}", std::string_view(reply->body).substr(0, reply->body.size() - 1));
    }
    ++server.requests;

    http::response<http::string_body> res{reply->status, version};
    res.set(http::field::content_type, "text/plain");
    if (reply->allow != nullptr) res.set(http::field::allow, reply->allow);
    res.keep_alive(keep_alive && !server.stopping);
    res.body() = std::move(reply->body);
    res.prepare_payload();
    co_await http::async_write(socket, res, asio::redirect_error(use_awaitable, ec));
    if (ec || !res.keep_alive()) break;
  }
  server.sockets.erase(&socket);
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
}

awaitable<void> accept_loop(Server& server) {
  for (;;) {
    error_code ec;
    tcp::socket socket =
        co_await server.acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;  // the acceptor was closed (or cannot accept any more)
    ++server.connections;
    asio::co_spawn(server.acceptor.get_executor(), serve(server, std::move(socket)),
                   asio::detached);
  }
}

std::optional<std::uint16_t> parse_port(int argc, char** argv) {
  if (argc == 1) return 0;
  unsigned port = 0;
  if (argc == 3 && std::string_view(argv[1]) == "--port") {
    const std::string_view text(argv[2]);
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (error == std::errc() && end == text.data() + text.size() && port <= 65535) {
      return static_cast<std::uint16_t>(port);
    }
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<std::uint16_t> port = parse_port(argc, argv);
  if (!port) {
    fmt::print(stderr,
               "usage: long_poll_server [--port N]   (N in [0, 65535]; 0: any free port)\n");
    return 2;
  }
  asio::io_context io;
  Server server(io, *port);
  log("long_poll_server: listening on 127.0.0.1:{}", server.acceptor.local_endpoint().port());

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&server](error_code ec, int signal) {
    if (ec) return;
    log("long_poll_server: signal {}, stopping", signal);
    server.stop();
  });
  asio::co_spawn(io, accept_loop(server), asio::detached);
  io.run();  // returns once the acceptor and every connection have closed

  std::string counters = server.counters();
  std::replace(counters.begin(), counters.end(), '\n', ' ');
  log("long_poll_server: stopped: {}", counters);
  return 0;
}

#else  // !BOOST_ASIO_HAS_CO_AWAIT

int main() {
  fmt::print(
      "long_poll_server: this compiler and Boost {}.{} give Asio no co_await support; skipped\n",
      BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000);
  return 77;  // CTest's SKIP_RETURN_CODE
}

#endif
