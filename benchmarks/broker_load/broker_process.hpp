// The broker under test: the real demo_broker binary, started as a child process on
// 127.0.0.1:0 (it inherits this process's RLIMIT_NOFILE), its port read from its first line.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "options.hpp"

namespace broker_load {

class BrokerProcess {
 public:
  // Starts --broker-bin with --broker-args and waits up to 30 s for "listening on ...:PORT".
  // Throws std::runtime_error when it cannot start it or read its port.
  explicit BrokerProcess(const Options& o);
  ~BrokerProcess() { stop(); }
  BrokerProcess(const BrokerProcess&) = delete;
  BrokerProcess& operator=(const BrokerProcess&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  // VmRSS in KiB, 0 when unreadable.
  [[nodiscard]] long rss_kib() const;
  // SIGTERM, then up to 20 s for a clean exit (SIGKILL after). Returns "" for exit status 0, else
  // what happened.
  std::string stop();

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace broker_load
