// Small helpers shared by the contract suite (besides tests/timer and tests/purgatory support).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace purgatory::contract {

// A one-shot event: set() once, wait() from any thread. wait() gives up after `timeout` and
// returns false, so a test whose choreography broke fails instead of hanging.
class Signal {
 public:
  void set() {
    const std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return set_; });
  }
  bool is_set() {
    const std::lock_guard<std::mutex> lock(mu_);
    return set_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

}  // namespace purgatory::contract
