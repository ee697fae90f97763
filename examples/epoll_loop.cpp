// The timer in your own event loop: a line server on epoll, one thread, no Asio. The purgatory's
// timeouts live on a SystemTimer this loop drives through an ExternalDriver: epoll_wait() sleeps
// until the timer's next deadline, and due timeouts run in the loop.
//
//   WAIT <key> <timeout_ms>   "VALUE <v>" once a SET on <key> comes, or "EXPIRED" after
//                             timeout_ms (in [0, 60000])
//   SET <key> <v>             completes every WAIT parked on <key>: "OK <how many>"
//   STATS                     "STATS waiting W completed C expired E cancelled X shut_down S"
//
// One answer line per line, in order: a connection is not read while its WAIT is parked (or its
// answers wait), but a client that hangs up (or closes its side) withdraws its WAIT at once. A
// bad line gets "ERR <what is wrong>". `epoll_loop [--port N]` serves on 127.0.0.1:N (0, the
// default: the OS picks; the first line printed says which). SIGINT/SIGTERM: every parked WAIT
// answers "SHUTTING_DOWN", connections close once written to (2 s at most), exit status 0.
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include <purgatory/delayed_operation_purgatory.hpp>
#include <purgatory/timer/external_driver.hpp>

namespace {

using namespace std::chrono_literals;
constexpr std::size_t kMaxLine = 1024;
constexpr long kMaxTimeoutMs = 60'000;

int check(int result, const char* call) {
  if (result < 0) throw std::system_error(errno, std::generic_category(), call);
  return result;
}

// SIGINT and SIGTERM, blocked, queue on this descriptor: the loop reads them like any other input,
// with no handler. (Blocked before any thread starts, and this process starts none.)
int signal_fd() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  check(pthread_sigmask(SIG_BLOCK, &set, nullptr), "pthread_sigmask");
  return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

// A descriptor closed when it goes (the eventfd must outlive the driver that writes to it).
struct Fd {
  explicit Fd(int result, const char* call) : fd(check(result, call)) {}
  ~Fd() { close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  const int fd;
};

struct Conn {
  int fd = -1;
  std::string in;                // read, not yet served
  std::string out;               // answers not yet written
  purgatory::OperationRef wait;  // the last WAIT: parked while not completed
  bool skipping = false;         // inside an over-long line: dropped up to its newline
  bool gone = false;             // hung up or failed: closed at the end of the loop's turn
  std::uint32_t events = 0;      // what epoll watches on it now
  [[nodiscard]] bool parked() const { return wait && !wait->is_completed(); }
};

// Whether `text` is a whole number in [0, max], then in `out`.
bool whole_number(std::string_view text, long max, long& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size() && out >= 0 && out <= max;
}

// "word rest": the text before the first space, and what follows it.
std::pair<std::string_view, std::string_view> split(std::string_view text) {
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return {text, {}};
  return {text.substr(0, space), text.substr(space + 1)};
}

struct Server {
  // A parked WAIT. Its callbacks run on the loop's thread: in a SET's check_and_complete(), in
  // advance_clock() (the timeout, through the InlineExecutor), in shutdown() or in cancel().
  class Wait final : public purgatory::DelayedOperation {
   public:
    Wait(Server& server, Conn& conn, std::chrono::milliseconds timeout)
        : DelayedOperation(timeout), server_(server), conn_(conn) {}

   protected:
    bool try_complete() override {
      // check_and_complete(key) tries only the WAITs on that key: a SET on it is running.
      if (server_.setting == nullptr) return false;
      value_ = *server_.setting;
      return true;
    }
    void on_complete() override {
      if (outcome() == purgatory::Outcome::completed) server_.reply(conn_, "VALUE " + value_);
      if (outcome() == purgatory::Outcome::expired) server_.reply(conn_, "EXPIRED");
      if (outcome() == purgatory::Outcome::shut_down) server_.reply(conn_, "SHUTTING_DOWN");
      // Outcome::cancelled: the client hung up, nobody to answer.
    }

   private:
    Server& server_;
    Conn& conn_;  // outlives the operation's pending life: a hang-up cancels it before closing
    std::string value_;
  };

  // Members are destroyed in reverse: the purgatory before its timer, and the driver (which stops
  // calling the wakeup) before the eventfd it writes to.
  Fd epoll{epoll_create1(EPOLL_CLOEXEC), "epoll_create1"};
  Fd wake{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd"};
  Fd signals{signal_fd(), "signalfd"};
  Fd listener{socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), "socket"};
  purgatory::SystemTimer timer{{.name = "epoll-loop",
                                .executor = std::make_shared<purgatory::InlineExecutor>(),
                                .driver = purgatory::TimerOptions::Driver::external}};
  // The timer calls this when an add() (or a cancel() that empties it) changes when the loop must
  // wake, on the thread that made that call, possibly while the loop sleeps in epoll_wait(). The
  // eventfd keeps the wakeup until the loop reads it, so none is lost between timeout_ms() and
  // epoll_wait(). Here every add comes from the loop's own thread (it costs a spare turn); a
  // worker thread adding tasks would need it. Non-blocking: the wakeup must never block.
  purgatory::ExternalDriver driver{timer, [fd = wake.fd] { eventfd_write(fd, 1); }};
  purgatory::DelayedOperationPurgatory<std::string> waits{timer, {.name = "waits"}};
  const std::string* setting = nullptr;  // the value of the SET whose check is running
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  std::vector<int> touched;  // connections to serve, write, close at the end of the turn
  bool stopping = false;
  bool given_up = false;  // stopping, and 2 s passed with answers unwritten

  explicit Server(std::uint16_t port) {
    const int on = 1;
    check(setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on), "setsockopt");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    check(bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), "bind");
    check(listen(listener.fd, SOMAXCONN), "listen");
    socklen_t len = sizeof addr;
    check(getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len), "getsockname");
    for (const int fd : {wake.fd, signals.fd, listener.fd})
      watch(fd, EPOLL_CTL_ADD, EPOLLIN);
    std::printf("listening on 127.0.0.1:%u\n", ntohs(addr.sin_port));
    std::fflush(stdout);
  }

  int run() {
    epoll_event events[64];
    while (!(stopping && conns.empty()) && !given_up) {
      // timeout_ms(): -1 while no timeout is pending (sleep until I/O), 0 when one is due now,
      // else the milliseconds to the earliest, rounded up so that the wait never ends before it.
      const int n = epoll_wait(epoll.fd, events, 64, driver.timeout_ms());
      if (n < 0 && errno != EINTR) check(n, "epoll_wait");
      for (int i = 0; i < n; ++i)
        dispatch(events[i]);
      driver.advance_clock();  // every WAIT whose timeout is due answers EXPIRED here
      settle();
    }
    std::printf("stopped: %s\n", stats().c_str());
    return 0;
  }

  void watch(int fd, int op, std::uint32_t events) {
    epoll_event event{.events = events, .data = {.fd = fd}};
    check(epoll_ctl(epoll.fd, op, fd, &event), "epoll_ctl");
  }

  void dispatch(const epoll_event& event) {
    const int fd = event.data.fd;
    if (fd == wake.fd) {
      eventfd_t ignored;  // read before the next timeout_ms(), which sees what the writer added
      eventfd_read(wake.fd, &ignored);
    } else if (fd == signals.fd) {
      signalfd_siginfo info;
      if (read(signals.fd, &info, sizeof info) == sizeof info) stop();
    } else if (fd == listener.fd) {
      int client = -1;
      while ((client = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        auto& c = *conns.emplace(client, std::make_unique<Conn>()).first->second;
        c.fd = client;
        c.events = EPOLLIN | EPOLLRDHUP;
        watch(client, EPOLL_CTL_ADD, c.events);
      }
    } else if (const auto it = conns.find(fd); it != conns.end()) {
      Conn& c = *it->second;
      const bool reading = (c.events & EPOLLIN) != 0;  // else EPOLLRDHUP alone says it hung up
      if ((event.events & (EPOLLHUP | EPOLLERR)) || (!reading && (event.events & EPOLLRDHUP))) {
        return hang_up(c);
      }
      if (event.events & EPOLLIN) {
        char buffer[4096];
        const ssize_t got = recv(c.fd, buffer, sizeof buffer, 0);
        if (got > 0) c.in.append(buffer, static_cast<std::size_t>(got));
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return hang_up(c);
      }
      touched.push_back(c.fd);  // to serve what came in, or write what is left (EPOLLOUT)
    }
  }

  void reply(Conn& c, std::string_view text) {
    c.out.append(text).push_back('\n');
    touched.push_back(c.fd);
  }

  void hang_up(Conn& c) {
    if (c.parked()) c.wait->cancel();  // withdrawn: it leaves its key and its timeout at once
    c.gone = true;
    touched.push_back(c.fd);
  }

  // Serves the complete lines read, in order, until one parks a WAIT (the rest wait its answer).
  void serve_lines(Conn& c) {
    while (!c.parked() && !c.gone) {
      const std::size_t eol = c.in.find('\n');
      if (eol == std::string::npos && c.in.size() <= kMaxLine) return;  // wait for the rest
      std::string line = c.in.substr(0, eol);
      c.in.erase(0, eol == std::string::npos ? eol : eol + 1);
      const bool was_skipping = std::exchange(c.skipping, eol == std::string::npos);
      if (was_skipping) continue;  // the end of a line already answered
      if (line.size() > kMaxLine) {
        reply(c, "ERR line longer than 1024 bytes");
      } else {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        handle(c, line);
      }
    }
  }

  void handle(Conn& c, std::string_view line) {
    const auto [command, rest] = split(line);
    const auto [key, arg] = split(rest);
    if (command == "WAIT") {
      long ms = -1;
      if (key.empty() || arg.empty() || arg.find(' ') != std::string_view::npos) {
        reply(c, "ERR usage: WAIT <key> <timeout_ms>");
      } else if (!whole_number(arg, kMaxTimeoutMs, ms)) {
        reply(c, "ERR timeout_ms '" + std::string(arg) +
                     "' is not a whole number of milliseconds in [0, 60000]");
      } else {
        c.wait = purgatory::make_operation<Wait>(*this, c, std::chrono::milliseconds(ms));
        // Its timeout goes on the timer; the next turn's timeout_ms() counts it.
        waits.try_complete_else_watch(c.wait, std::string(key));
      }
    } else if (command == "SET") {
      if (key.empty() || arg.empty()) return reply(c, "ERR usage: SET <key> <value>");
      const std::string value(arg);
      setting = &value;
      const std::size_t completed = waits.check_and_complete(std::string(key));
      setting = nullptr;
      reply(c, "OK " + std::to_string(completed));
    } else if (command == "STATS") {
      reply(c, rest.empty() ? "STATS " + stats() : "ERR usage: STATS");
    } else {
      reply(c, "ERR unknown command '" + std::string(command) +
                   "' (WAIT <key> <timeout_ms>, SET <key> <value> or STATS)");
    }
  }

  // SIGINT/SIGTERM: no new connections or lines; every parked WAIT answers SHUTTING_DOWN.
  void stop() {
    if (std::exchange(stopping, true)) return;
    watch(listener.fd, EPOLL_CTL_DEL, 0);
    waits.shutdown();  // their on_complete() runs here, on this thread
    for (const auto& [fd, c] : conns)
      touched.push_back(fd);
    // The same timer serves the loop's own deadlines: a client that does not read its answer
    // keeps the server 2 s at most.
    timer.add(purgatory::make_task([this] { given_up = true; }), 2s);
  }

  // The end of a turn: the connections touched get their lines served, their answers written and
  // their epoll interest updated; those gone are closed. No callback runs this: it may close.
  void settle() {
    for (std::size_t i = 0; i < touched.size(); ++i) {  // serving may touch more
      const auto it = conns.find(touched[i]);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      if (!stopping) serve_lines(c);
      while (!c.gone && !c.out.empty()) {
        const ssize_t sent = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (sent < 0 && (errno == EAGAIN || errno == EINTR)) break;  // EPOLLOUT says when
        if (sent < 0) hang_up(c);
        if (sent > 0) c.out.erase(0, static_cast<std::size_t>(sent));
      }
      if (c.gone || (stopping && c.out.empty())) {
        close(c.fd);  // also leaves the epoll set
        conns.erase(it);
        continue;
      }
      // Read only with no WAIT parked and no answer unwritten (a client that does not read its
      // answers is not read: its buffers stay bounded); EPOLLRDHUP still reports a hang-up.
      const bool input = !c.parked() && c.out.empty() && !stopping;
      const std::uint32_t events =
          (stopping ? 0U : EPOLLRDHUP) | (input ? EPOLLIN : 0U) | (c.out.empty() ? 0U : EPOLLOUT);
      if (events != std::exchange(c.events, events)) watch(c.fd, EPOLL_CTL_MOD, events);
    }
    touched.clear();
  }

  [[nodiscard]] std::string stats() const {
    const purgatory::PurgatoryMetrics m = waits.metrics();
    return "waiting " + std::to_string(m.delayed) + " completed " +
           std::to_string(m.completed_total) + " expired " + std::to_string(m.expired_total) +
           " cancelled " + std::to_string(m.cancelled_total) + " shut_down " +
           std::to_string(m.shut_down_total);
  }
};

}  // namespace

int main(int argc, char** argv) {
  long port = 0;
  if (argc != 1 &&
      !(argc == 3 && std::string_view(argv[1]) == "--port" && whole_number(argv[2], 65535, port))) {
    std::fprintf(stderr, "usage: epoll_loop [--port N]   (N in [0, 65535]; 0: any free port)\n");
    return 2;
  }
  try {
    Server server(static_cast<std::uint16_t>(port));
    return server.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epoll_loop: %s\n", e.what());
    return 1;
  }
}
