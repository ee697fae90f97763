// Helpers shared by the broker tests: an in-process broker on a free loopback port, and polling
// for conditions the broker's io thread makes true.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "demo/client.hpp"
#include "protocol/records.hpp"
#include "server/broker_config.hpp"
#include "server/broker_runner.hpp"

namespace purgatory::broker::test {

// Collects the broker's log lines (written on its io thread). Thread-safe.
class LogCapture {
 public:
  void add(std::string_view line) {
    const std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(line);
  }
  [[nodiscard]] std::vector<std::string> lines() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  [[nodiscard]] bool contains(std::string_view text) const {
    const std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& l : lines_) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// A broker on 127.0.0.1, any free port, no followers (the HW follows the log end), logging into
// `log` (which must outlive the broker).
inline BrokerConfig test_config(LogCapture& log) {
  BrokerConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.replication_delays.clear();
  c.verbose = true;
  c.log_sink = [&log](std::string_view line) { log.add(line); };
  return c;
}

// A broker of test_config() (changed by `tweak`, if given) running on its own thread, and a
// client connected to it.
struct BrokerWithClient {
  LogCapture log;
  BrokerRunner broker;
  Client client;

  explicit BrokerWithClient(const std::function<void(BrokerConfig&)>& tweak = {})
      : broker(configure(log, tweak)) {
    client.connect("127.0.0.1", broker.port());
  }

 private:
  static BrokerConfig configure(LogCapture& log, const std::function<void(BrokerConfig&)>& tweak) {
    BrokerConfig c = test_config(log);
    if (tweak) tweak(c);
    return c;
  }
};

// Polls `pred` every millisecond until it holds or `timeout` passes; returns its last value.
template <class Pred>
bool wait_until(Pred&& pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

inline std::vector<ProducerRecord> values(std::initializer_list<const char*> vs) {
  std::vector<ProducerRecord> out;
  for (const char* v : vs)
    out.push_back({std::nullopt, std::string(v)});
  return out;
}

// Sanitizers slow everything down: real-time bounds get wider there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace purgatory::broker::test
