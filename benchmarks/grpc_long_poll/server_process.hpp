// A Mailbox server the benchmark runs as a process of its own, so that its CPU time and resident
// memory are its own: started on port 0, read from /proc while it runs, stopped with SIGTERM.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace grpc_bench {

/// One server process. Thread-compatible.
class ServerProcess {
 public:
  /// Starts `binary --port 0` and reads its first line (`listening on 127.0.0.1:PORT`, within
  /// 30 s). Throws std::runtime_error if it does not say that.
  explicit ServerProcess(const std::string& binary);
  /// Kills the process if it still runs.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  /// User plus system CPU time of the whole process so far (/proc/PID/stat, in clock ticks).
  [[nodiscard]] double cpu_seconds() const;
  /// Context switches of its threads so far, voluntary and not (/proc/PID/task/*/status; a thread
  /// that has ended no longer counts).
  [[nodiscard]] long context_switches() const;
  /// Its resident set (/proc/PID/status, VmRSS).
  [[nodiscard]] long rss_bytes() const;
  /// SIGTERM, then its exit status (waiting up to 30 s, then SIGKILL and -1); `last_line` gets
  /// the last line it printed.
  int stop(std::string* last_line = nullptr);

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;  // kept open until it exits: its last lines must not meet a closed pipe
  std::uint16_t port_ = 0;
};

}  // namespace grpc_bench
