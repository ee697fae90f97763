#include "mode_parked.hpp"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

namespace purgatory_bench {
namespace {

// Runs impl.park in a child process; returns its bytes per request (negative: it failed).
double park_in_child(const Implementation& impl, const Config& config) {
  std::fflush(stdout);
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(pipe_fds[0]);
    const double bytes = impl.park(config, impl.name);
    std::fflush(stdout);
    (void)!write(pipe_fds[1], &bytes, sizeof(bytes));
    _exit(bytes < 0 ? 1 : 0);
  }
  close(pipe_fds[1]);
  double bytes = -1;
  if (read(pipe_fds[0], &bytes, sizeof(bytes)) != static_cast<ssize_t>(sizeof(bytes))) bytes = -1;
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? bytes : -1;
}

}  // namespace

int run_parked(const Config& config, const std::vector<const Implementation*>& impls) {
  std::vector<std::pair<std::string, double>> bytes;
  for (const Implementation* impl : impls) {
    if (impl->park != nullptr) bytes.emplace_back(impl->name, park_in_child(*impl, config));
  }
  bool failed = false;
  std::string line;
  for (const auto& [name, b] : bytes) {
    failed = failed || b < 0;
    line += fmt::format("{}{} {:.1f}", line.empty() ? "" : ", ", name, b);
  }
  // Last, for scripts.
  fmt::print("bytes per parked request: {}\n", line);
  return failed ? 1 : 0;
}

}  // namespace purgatory_bench
