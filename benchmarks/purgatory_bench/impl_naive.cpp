// --impl=naive: the purgatory written the obvious way. One mutex, an unordered_multimap from key
// to operation, one boost::asio::steady_timer per operation on an io_context run by one thread.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "mode_parked.hpp"
#include "mode_rate.hpp"
#include "purgatory_under_test.hpp"
#include "stats.hpp"

namespace purgatory_bench {
namespace {

using std::chrono::nanoseconds;

class Naive {
 public:
  struct Op {
    Op(boost::asio::io_context& io, std::vector<int> k, Clock::time_point a, Clock::time_point c,
       Stats& s)
        : timer(io), keys(std::move(k)), arrival(a), completes_at(c), stats(s) {}
    boost::asio::steady_timer timer;
    std::vector<int> keys;
    Clock::time_point arrival;
    Clock::time_point completes_at;
    Stats& stats;
    bool done = false;  // guarded by Naive::mu_
  };
  using Handle = std::shared_ptr<Op>;

  explicit Naive(const Config&) : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~Naive() { shutdown(); }

  Handle add(nanoseconds timeout, Clock::time_point arrival, Clock::time_point completes_at,
             const std::vector<int>& keys, Stats& stats) {
    auto op = std::make_shared<Op>(io_, keys, arrival, completes_at, stats);
    const std::lock_guard<std::mutex> lock(mu_);
    for (int key : keys)
      watchers_.emplace(key, op);
    op->timer.expires_after(timeout);
    op->timer.async_wait([this, op](const boost::system::error_code& ec) {
      if (!ec) expire(op);
    });
    return op;
  }
  void complete(const Handle& op) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (op->done) return;
      op->done = true;
      unwatch(*op);
    }
    // Asio timers are not thread-safe objects: cancel on the thread that runs the io_context.
    boost::asio::post(io_, [op] { op->timer.cancel(); });
    record_completed(op->stats, op->arrival, op->completes_at);
  }
  std::size_t watched() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return watchers_.size();
  }
  std::size_t delayed() const { return watched(); }
  void shutdown() {
    if (!thread_.joinable()) return;
    work_.reset();
    io_.stop();
    thread_.join();
  }

  // --parked: a request that will not complete before its timeout.
  Handle park(nanoseconds timeout, int key, Stats& stats) {
    const auto now = Clock::now();
    return add(timeout, now, now + std::chrono::hours(1), {key}, stats);
  }
  static std::string parked_object() {
    return fmt::format("{}-byte Op in a shared_ptr, a 1-key vector, a multimap node", sizeof(Op));
  }

 private:
  void expire(const Handle& op) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (op->done) return;
      op->done = true;
      unwatch(*op);
    }
    op->stats.expiry.record(Clock::now() - op->arrival);
    op->stats.resolved.fetch_add(1);
  }
  void unwatch(const Op& op) {
    for (int key : op.keys) {
      auto [it, end] = watchers_.equal_range(key);
      for (; it != end; ++it) {
        if (it->second.get() == &op) {
          watchers_.erase(it);
          break;
        }
      }
    }
  }

  mutable std::mutex mu_;
  std::unordered_multimap<int, Handle> watchers_;  // guarded by mu_
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace

const Implementation& naive_implementation() {
  static constexpr Implementation kNaive{"naive", &run_rate<Naive>, &park<Naive>, nullptr};
  return kNaive;
}

}  // namespace purgatory_bench
