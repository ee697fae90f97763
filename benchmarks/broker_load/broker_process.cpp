#include "broker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

extern char** environ;

namespace broker_load {

using Clock = std::chrono::steady_clock;

BrokerProcess::BrokerProcess(const Options& o) {
  std::vector<std::string> args{o.broker_bin, "--listen", "127.0.0.1:0", "--partitions",
                                std::to_string(o.partitions)};
  std::string word;
  for (const char c : o.broker_args + ' ') {
    if (c != ' ') {
      word += c;
    } else if (!word.empty()) {
      args.push_back(std::exchange(word, {}));
    }
  }
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  stdout_ = out[0];
  if (rc != 0) throw std::runtime_error(fmt::format("cannot start {}: errno {}", argv[0], rc));
  // "listening on 127.0.0.1:PORT\n", within 30 s.
  std::string line;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (line.find('\n') == std::string::npos && Clock::now() < deadline) {
    pollfd p{stdout_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[256];
    const ssize_t n = read(stdout_, buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<std::size_t>(n));
  }
  const auto colon = line.rfind(':');
  if (line.rfind("listening on 127.0.0.1:", 0) != 0 || colon == std::string::npos) {
    stop();
    throw std::runtime_error(fmt::format("the broker did not report its port: '{}'", line));
  }
  port_ = static_cast<std::uint16_t>(std::stoi(line.substr(colon + 1)));
}

long BrokerProcess::rss_kib() const {
  std::ifstream in(fmt::format("/proc/{}/status", pid_));
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      in >> kib;
      return kib;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

std::string BrokerProcess::stop() {
  if (pid_ <= 0) return "not running";
  kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  pid_t r = 0;
  while ((r = waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    usleep(20'000);
  if (r == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return "did not exit within 20 s of SIGTERM (killed)";
  }
  pid_ = -1;
  close(stdout_);
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 0 ? "" : fmt::format("exit {}", WEXITSTATUS(status));
  return fmt::format("killed by signal {}", WTERMSIG(status));
}

}  // namespace broker_load
