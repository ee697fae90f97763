#include "server_process.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace grpc_bench {

namespace {

// What the process printed until `deadline` or until `done(text)` says it is enough.
template <class Done>
std::string read_until(int fd, std::chrono::steady_clock::time_point deadline, Done done) {
  std::string text;
  char buffer[4096];
  while (!done(text)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;  // closed: it exited
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace

ServerProcess::ServerProcess(const std::string& binary) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe() failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork() failed");
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(binary.c_str(), binary.c_str(), "--port", "0", static_cast<char*>(nullptr));
    std::perror(binary.c_str());
    _exit(127);
  }
  close(fds[1]);
  stdout_fd_ = fds[0];
  const std::string first =
      read_until(stdout_fd_, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                 [](const std::string& text) { return text.find('\n') != std::string::npos; });
  constexpr std::string_view kListening = "listening on 127.0.0.1:";
  if (first.rfind(kListening, 0) != 0) {
    throw std::runtime_error(binary + " printed '" + first + "', not '" + std::string(kListening) +
                             "PORT'");
  }
  port_ = static_cast<std::uint16_t>(std::stoul(first.substr(kListening.size())));
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

double ServerProcess::cpu_seconds() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The fields after the command name (in parentheses, which may hold spaces): utime and stime
  // are the 14th and 15th of the line, the 12th and 13th after the ')'.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> f(13);
  for (std::string& field : f)
    fields >> field;
  const double ticks = std::stod(f[11]) + std::stod(f[12]);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

long ServerProcess::context_switches() const {
  long total = 0;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid_) + "/task";
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream in(task.path() / "status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("ctxt_switches:") != std::string::npos) {
        total += std::stol(line.substr(line.find(':') + 1));
      }
    }
  }
  return total;
}

long ServerProcess::rss_bytes() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6)) * 1024;
  }
  return -1;
}

int ServerProcess::stop(std::string* last_line) {
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid_, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done != pid_) return -1;  // the destructor kills it
  pid_ = -1;
  if (last_line != nullptr) {
    // It has exited: what it printed is all in the pipe, up to the end of the stream.
    std::string text;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = read(stdout_fd_, buffer, sizeof buffer)) > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    }
    while (!text.empty() && text.back() == '\n')
      text.pop_back();
    *last_line = text.substr(text.rfind('\n') + 1);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace grpc_bench
