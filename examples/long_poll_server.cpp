// A long-poll endpoint on Boost.Asio: each parked request is a DelayedOperation in a purgatory,
// awaited with co_await, and a client that hangs up cancels its wait, which withdraws the
// operation from the purgatory.
//
//   GET  /wait?key=K&timeout_ms=T     answers the next value published on K, or "timeout" after T
//   POST /publish?key=K&value=V       publishes V on K (completes its waits); answers how many
//
// One thread runs everything: the io_context drives the purgatory's timer (AsioDriver) and runs
// its expirations (AsioExecutor), so no lock is ever contended. Plain tokens only: no URL
// decoding, one request per connection.
//
//   long_poll_server              serves on 127.0.0.1 (the OS picks the port; it is printed)
//   long_poll_server --self-test  also runs three clients in-process and exits 0 if each behaved:
//                                 a wait completed early by a publish, one timing out, one
//                                 cancelled by its client hanging up
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange (g++ 12)

#include <fmt/core.h>
#include <boost/asio/io_context.hpp>
#include <boost/version.hpp>

#if defined(BOOST_ASIO_HAS_CO_AWAIT)

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "purgatory/asio.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/timer/asio.hpp"
#include "purgatory/timer/async.hpp"

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

// The latest value published on each key, numbered so a wait knows whether it is new to it.
// Thread-safe.
class Mailbox {
 public:
  struct Entry {
    std::uint64_t sequence = 0;
    std::string value;
  };
  Entry latest(const std::string& key) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = entries_.find(key);
    return it == entries_.end() ? Entry{} : it->second;
  }
  void publish(const std::string& key, std::string value) {
    const std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[key];
    ++e.sequence;
    e.value = std::move(value);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;  // guarded by mu_
};

// A parked GET /wait: completes once `key` has a value published after the request arrived.
// Thread-safe, as any DelayedOperation.
class WaitForPublish final : public purgatory::DelayedOperation {
 public:
  WaitForPublish(const Mailbox& mailbox, std::string key, purgatory::Nanos timeout)
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
    return force_complete();
  }
  void on_complete() override {}  // the awaiting coroutine answers

 private:
  const Mailbox& mailbox_;
  const std::string key_;
  const std::uint64_t seen_;
  std::string value_;  // written under the operation's lock, before the outcome
};

// Everything a connection needs. Used from the io_context's thread.
struct Server {
  explicit Server(asio::io_context& io)
      : timer(std::make_shared<purgatory::SystemTimer>(purgatory::TimerOptions{
            .name = "long-poll",
            .executor = std::make_shared<purgatory::AsioExecutor>(io.get_executor()),
            .driver = purgatory::TimerOptions::Driver::external})),
        driver(io.get_executor(), *timer),
        waits(timer),
        acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {}

  std::shared_ptr<purgatory::SystemTimer> timer;
  purgatory::AsioDriver driver;
  purgatory::DelayedOperationPurgatory<std::string> waits;
  Mailbox mailbox;
  tcp::acceptor acceptor;
};

struct Request {
  std::string method;
  std::string path;
  std::map<std::string, std::string, std::less<>> params;
};

// "GET /wait?key=a&timeout_ms=100 HTTP/1.1" -> {GET, /wait, {key: a, timeout_ms: 100}}.
Request parse_request_line(std::string_view line) {
  Request r;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const auto sp1 = line.find(' ');
  const auto sp2 = line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) return r;
  r.method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const auto q = target.find('?');
  r.path = target.substr(0, q);
  std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const auto eq = pair.find('=');
    if (eq != std::string_view::npos) r.params.emplace(pair.substr(0, eq), pair.substr(eq + 1));
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
  }
  return r;
}

std::string response(int status, std::string_view body) {
  const char* reason = status == 200 ? "OK" : status == 404 ? "Not Found" : "Bad Request";
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", status,
                     reason, body.size(), body);
}

// Parks the request in the purgatory until a publish, the timeout, or the client hanging up.
// Returns the body to answer, or nothing when the client went away.
awaitable<std::optional<std::string>> long_poll(tcp::socket& socket, Server& server,
                                                std::string key,
                                                std::chrono::milliseconds timeout) {
  const boost::intrusive_ptr<WaitForPublish> op(new WaitForPublish(server.mailbox, key, timeout));
  server.waits.try_complete_else_watch(op, {key});

  // The client sends nothing more: a read that ends (EOF, reset) means it hung up.
  std::stop_source hung_up;
  auto probe = std::make_shared<char>();
  socket.async_read_some(asio::buffer(probe.get(), 1),
                         [hung_up, probe](error_code, std::size_t) mutable {
                           hung_up.request_stop();  // finds the wait already done if it answered
                         });

  error_code ec;
  const purgatory::Outcome outcome = co_await purgatory::async_wait_outcome(
      op, hung_up.get_token(), asio::redirect_error(use_awaitable, ec));
  if (ec) co_return std::nullopt;  // withdrawn from the purgatory: nobody to answer
  socket.cancel();                 // stop the probe
  switch (outcome) {
    case purgatory::Outcome::completed:
      co_return op->value();
    case purgatory::Outcome::expired:
      co_return "timeout";
    default:
      co_return "shutting down";
  }
}

awaitable<void> serve(tcp::socket socket, Server& server) {
  asio::streambuf in;
  error_code ec;
  co_await asio::async_read_until(socket, in, "\r\n\r\n", asio::redirect_error(use_awaitable, ec));
  if (ec) co_return;
  std::istream stream(&in);
  std::string line;
  std::getline(stream, line);
  const Request req = parse_request_line(line);

  std::string answer;
  const bool wait = req.method == "GET" && req.path == "/wait";
  const bool publish = req.method == "POST" && req.path == "/publish";
  const auto key = req.params.find("key");
  if (!wait && !publish) {
    answer = response(404, "no such endpoint\n");
  } else if (key == req.params.end() || key->second.empty()) {
    answer = response(400, "a key parameter is required\n");
  } else if (wait) {
    long timeout_ms = -1;
    const auto t = req.params.find("timeout_ms");
    if (t != req.params.end()) {
      std::from_chars(t->second.data(), t->second.data() + t->second.size(), timeout_ms);
    }
    if (timeout_ms < 0 || timeout_ms > 60'000) {
      answer = response(400, "timeout_ms must be in [0, 60000]\n");
    } else {
      auto body =
          co_await long_poll(socket, server, key->second, std::chrono::milliseconds(timeout_ms));
      if (!body) co_return;
      answer = response(200, *body);
    }
  } else {
    const auto value = req.params.find("value");
    server.mailbox.publish(key->second, value == req.params.end() ? "" : value->second);
    answer = response(200, std::to_string(server.waits.check_and_complete(key->second)));
  }
  co_await asio::async_write(socket, asio::buffer(answer), asio::redirect_error(use_awaitable, ec));
}

awaitable<void> accept_loop(Server& server) {
  for (;;) {
    error_code ec;
    tcp::socket socket =
        co_await server.acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;  // the acceptor was closed (or cannot accept any more)
    asio::co_spawn(server.acceptor.get_executor(), serve(std::move(socket), server),
                   asio::detached);
  }
}

// ---- self-test: the clients -------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

// Sends one request and returns the response body ("" if the connection failed).
awaitable<std::string> http(std::uint16_t port, std::string_view method, std::string_view target) {
  tcp::socket socket(co_await asio::this_coro::executor);
  error_code ec;
  co_await socket.async_connect({asio::ip::address_v4::loopback(), port},
                                asio::redirect_error(use_awaitable, ec));
  if (ec) co_return "";
  const std::string request =
      fmt::format("{} {} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", method, target);
  co_await asio::async_write(socket, asio::buffer(request),
                             asio::redirect_error(use_awaitable, ec));
  std::string reply;
  co_await asio::async_read(socket, asio::dynamic_buffer(reply),
                            asio::redirect_error(use_awaitable, ec));  // to EOF
  const auto body = reply.find("\r\n\r\n");
  co_return body == std::string::npos ? "" : reply.substr(body + 4);
}

// Polls `condition` every millisecond (on the purgatory's timer) for at most `limit`.
awaitable<bool> eventually(Server& server, std::function<bool()> condition,
                           Clock::duration limit = 10s) {
  const auto deadline = Clock::now() + limit;
  while (!condition()) {
    if (Clock::now() > deadline) co_return false;
    co_await purgatory::async_wait(*server.timer, 1ms, use_awaitable);
  }
  co_return true;
}

awaitable<bool> self_test(Server& server, std::uint16_t port) {
  bool ok = true;
  auto check = [&ok](bool passed, std::string_view what) {
    fmt::print("  [{}] {}\n", passed ? "ok" : "FAILED", what);
    ok = ok && passed;
  };

  // 1. Completed early: once the wait is parked, a plain completion handler on the timer
  //    publishes 50 ms later; the 10 s timeout never matters.
  {
    struct Exchange {
      std::optional<std::string> body;
      bool published = false;
    };
    const auto got = std::make_shared<Exchange>();
    const auto executor = co_await asio::this_coro::executor;
    const auto start = Clock::now();
    asio::co_spawn(executor, http(port, "GET", "/wait?key=news&timeout_ms=10000"),
                   [got](std::exception_ptr, std::string body) { got->body = std::move(body); });
    const bool parked = co_await eventually(server, [&] { return server.waits.watched() == 1; });
    purgatory::async_wait(*server.timer, 50ms, asio::bind_executor(executor, [=](error_code ec) {
      if (ec) return;
      asio::co_spawn(executor, http(port, "POST", "/publish?key=news&value=hello"),
                     [got](std::exception_ptr, std::string) { got->published = true; });
    }));
    const bool answered = co_await eventually(server, [&] { return got->body && got->published; });
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    check(parked && answered && got->body == "hello" && took >= 50ms,
          fmt::format("GET /wait?key=news answered \"{}\" after {} ms: completed by the publish",
                      got->body.value_or("<nothing>"), took.count()));
  }

  // 2. Timed out: nobody publishes on "quiet".
  {
    const auto start = Clock::now();
    const std::string body = co_await http(port, "GET", "/wait?key=quiet&timeout_ms=100");
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    check(body == "timeout" && took >= 100ms,
          fmt::format("GET /wait?key=quiet&timeout_ms=100 answered \"{}\" after {} ms", body,
                      took.count()));
  }

  // 3. Cancelled: the client hangs up while parked; the wait is cancelled and the operation
  //    leaves the purgatory long before its 30 s timeout.
  {
    tcp::socket socket(co_await asio::this_coro::executor);
    error_code ec;
    co_await socket.async_connect({asio::ip::address_v4::loopback(), port},
                                  asio::redirect_error(use_awaitable, ec));
    const std::string request = "GET /wait?key=gone&timeout_ms=30000 HTTP/1.1\r\n\r\n";
    co_await asio::async_write(socket, asio::buffer(request),
                               asio::redirect_error(use_awaitable, ec));
    const bool parked = co_await eventually(server, [&] { return server.waits.watched() == 1; });
    socket.close();
    const bool withdrawn = co_await eventually(server, [&] {
      return server.waits.watched() == 0 && server.waits.metrics().cancelled_total == 1;
    });
    check(!ec && parked && withdrawn,
          "a client hanging up cancelled its wait: the operation left the purgatory "
          "(watched() back to 0, cancelled_total 1)");
  }

  const purgatory::PurgatoryMetrics m = server.waits.metrics();
  check(m.completed_total == 1 && m.expired_total == 1 && m.cancelled_total == 1 && m.watched == 0,
        fmt::format("metrics: completed {}, expired {}, cancelled {}, watched {}",
                    m.completed_total, m.expired_total, m.cancelled_total, m.watched));
  co_return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const bool self_testing = argc > 1 && std::string_view(argv[1]) == "--self-test";
  asio::io_context io;
  Server server(io);
  const std::uint16_t port = server.acceptor.local_endpoint().port();
  fmt::print("long_poll_server: listening on 127.0.0.1:{}\n", port);
  std::fflush(stdout);
  asio::co_spawn(io, accept_loop(server), asio::detached);
  if (!self_testing) {
    io.run();
    return 0;
  }

  std::optional<bool> passed;
  asio::co_spawn(io, self_test(server, port), [&](std::exception_ptr error, bool ok) {
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        fmt::print("  self-test threw: {}\n", e.what());
      }
    }
    passed = !error && ok;
    server.acceptor.close();  // ends the accept loop
    server.waits.shutdown();
  });
  io.run_for(50s);  // returns once everything finished; the bound is a safety net
  if (!passed) fmt::print("  self-test did not finish in time\n");
  const bool ok = passed.value_or(false);
  fmt::print("long_poll_server --self-test: {}\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}

#else  // !BOOST_ASIO_HAS_CO_AWAIT

int main() {
  // clang 14 with libstdc++ and Boost 1.74: Asio only knows <experimental/coroutine> for clang.
  fmt::print(
      "long_poll_server: this compiler and Boost {}.{} give Asio no co_await support; skipped\n",
      BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000);
  return 77;  // CTest's SKIP_RETURN_CODE
}

#endif
