// The load: on one io thread, `--connections` consumers long-poll Fetch (max_wait_ms, min_bytes
// 1) on partition (i % partitions) from their next offset, and `--producers` producers produce
// small batches at a fixed rate, round robin over the partitions. After `--duration` seconds the
// producers stop, every consumer reads up to its partition's end, and the run ends.
//
// The scenario (start, warm-up, drain, the end and the report) is in load.cpp; what a consumer
// does with each Fetch response in load_consumer.cpp; what a producer sends and is told in
// load_producer.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "connection.hpp"
#include "failures.hpp"
#include "ledger.hpp"
#include "load_stats.hpp"
#include "options.hpp"

namespace broker_load {

constexpr std::int16_t kProduceVersion = 3;
constexpr std::int16_t kFetchVersion = 4;
constexpr std::int16_t kMetadataVersion = 4;
inline const std::string kTopic = "load";

class Load {
 public:
  Load(const Options& o, std::uint16_t port) : o_(o), port_(port), ledger_(o.partitions) {}

  // Runs the whole scenario on this thread; `sample_rss` is called every second and at warm-up,
  // `at_finish` once when the load ends (before the broker is stopped).
  void run(const std::function<void(bool warmup_point)>& sample_rss,
           std::function<void()> at_finish);

  // Checks what can only be checked at the end (every request answered, the ledger, every
  // consumer at its partition's end, the broker's RSS flat) and prints the figures.
  void verify_and_print(long rss_warm, long rss_end, long rss_max);

  Failures& failures() { return failures_; }

 private:
  struct Consumer {
    Consumer(asio::io_context& io, int i, int part, Failures& f)
        : conn(io, fmt::format("consumer-{}", i), f), index(i), partition(part) {}
    Conn conn;
    int index;
    int partition;
    std::int64_t next_offset = 0;
    std::unordered_map<std::int32_t, std::int64_t> last_seq;  // per producer
    bool done = false;
  };
  struct Producer {
    Producer(asio::io_context& io, int i, Failures& f)
        : conn(io, fmt::format("producer-{}", i), f), index(i), timer(io) {}
    Conn conn;
    int index;
    asio::steady_timer timer;
    std::int64_t next_seq = 0;
    int next_partition = 0;
    // Sent, not yet acked, in order: partition, first seq, count.
    std::deque<std::array<std::int64_t, 3>> sent;
  };

  // The scenario (load.cpp).
  void start_load();
  void begin_drain();
  void poll_drain();
  [[nodiscard]] bool producers_drained() const;
  void maybe_finish();
  void finish();

  // The consumers (load_consumer.cpp).
  void fetch(Consumer& c);
  void on_fetch(Consumer& c, pb::ByteView payload, Clock::time_point sent);

  // The producers (load_producer.cpp).
  void produce_tick(Producer& p);
  void on_produce(Producer& p, pb::ByteView payload, Clock::time_point sent);

  const Options& o_;
  std::uint16_t port_;
  asio::io_context io_;
  Failures failures_;
  Stats stats_;
  Ledger ledger_;
  std::function<void()> at_finish_;
  std::unique_ptr<Conn> setup_;
  std::vector<std::unique_ptr<Consumer>> consumers_;
  std::vector<std::unique_ptr<Producer>> producers_;
  std::unique_ptr<asio::steady_timer> poll_timer_;
  bool started_ = false, warmed_ = false, stopping_ = false, finished_ = false;
  Clock::time_point load_start_ = Clock::now(), measured_end_ = Clock::now(), drain_deadline_;
  double elapsed_s_ = 0;
};

}  // namespace broker_load
