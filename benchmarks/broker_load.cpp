// broker_load: "does demo_broker stay correct and flat under 1000 long-polling consumers?"
//
// Starts the real demo_broker binary as a child process on 127.0.0.1:0 (it inherits a raised
// RLIMIT_NOFILE), then drives it from one async io thread: `--connections` consumer connections,
// each long-polling Fetch (max_wait_ms, min_bytes 1) on partition (i % partitions) from its next
// offset, and `--producers` producer connections, each producing small batches at a fixed rate,
// round robin over the partitions. After `--duration` seconds the producers stop, every consumer
// reads up to the partition's end, the broker is stopped with SIGTERM and must exit 0.
//
// Invariants checked, counting (exit status 1 and a list of failures when one breaks):
//   - every request gets exactly one response: a response whose correlation id is unknown or
//     already answered is a failure, and so is a request still unanswered at the end;
//   - every record a producer got acked is consumed by every consumer of its partition exactly
//     once, at the acked offset, in order (offsets contiguous from 0, each producer's sequence
//     increasing), and no consumer sees a record that was not acked;
//   - the broker's RSS (/proc/PID/status VmRSS) at the end is within 20% or 20 MiB of its RSS
//     after warm-up (a quarter of the run).
// Printed: requests/s, produce latency p50/p99/p999, fetch "time to data" (producer's send to
// the consumer reading the record), fetch response time (includes the long-poll wait), RSS.
//
// Full run (manual; the CTest reliability.load_short is 200 connections, 5 producers, 10 s):
//   cmake --preset release && cmake --build --preset release
//   build/release/tests/reliability/reliability_broker_load
//       --broker-bin build/release/demo_broker/demo_broker
//       --connections 1000 --producers 20 --duration 60 --partitions 8
//

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "purgatory/broker/codec.hpp"
#include "purgatory/broker/framing.hpp"
#include "purgatory/broker/records.hpp"

extern char** environ;

namespace {

namespace asio = boost::asio;
namespace pb = purgatory::broker;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

constexpr std::int16_t kProduceVersion = 3;
constexpr std::int16_t kFetchVersion = 4;
constexpr std::int16_t kMetadataVersion = 4;
const std::string kTopic = "load";

struct Options {
  std::string broker_bin;
  std::string broker_args = "--followers 2 --replication-delay-ms 5 --retention-bytes 4194304";
  int connections = 1000;
  int producers = 20;
  int partitions = 8;
  double duration_s = 60;
  int produce_rate = 10;  // requests per second per producer
  int batch_records = 5;
  int producer_in_flight = 4;
  int acks = -1;
  int max_wait_ms = 500;
  double drain_s = 30;
  long rss_slack_mib = 20;  // allowed RSS growth after warm-up: max(20%, this)
};

// ---- the broker as a child process ---------------------------------------------------------

class BrokerProcess {
 public:
  BrokerProcess(const Options& o) {
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
  ~BrokerProcess() { stop(); }
  BrokerProcess(const BrokerProcess&) = delete;
  BrokerProcess& operator=(const BrokerProcess&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  // VmRSS in KiB, 0 when unreadable.
  [[nodiscard]] long rss_kib() const {
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
  // SIGTERM, then up to 20 s for a clean exit (SIGKILL after). Returns the exit description.
  std::string stop() {
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

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
  std::uint16_t port_ = 0;
};

// ---- counting invariants --------------------------------------------------------------------

struct Failures {
  std::uint64_t count = 0;
  std::vector<std::string> first;
  void add(std::string what) {
    if (++count <= 20) first.push_back(std::move(what));
  }
};

struct Stats {
  std::vector<std::uint32_t> produce_us, fetch_us, time_to_data_us;
  std::uint64_t responses = 0, produce_responses = 0, fetch_responses = 0, empty_fetches = 0;
  std::uint64_t records_consumed = 0;
};

std::uint32_t micros(Clock::duration d) {
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(d).count(), 0, UINT32_MAX));
}

std::string percentiles(std::vector<std::uint32_t>& v) {
  if (v.empty()) return "no samples";
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))] /
           1000.0;
  };
  return fmt::format("p50 {:.2f} ms, p99 {:.2f} ms, p999 {:.2f} ms, max {:.2f} ms ({} samples)",
                     at(0.5), at(0.99), at(0.999), v.back() / 1000.0, v.size());
}

// One record's identity: which producer sent it, its sequence number there.
struct RecordId {
  std::int32_t producer = -1;
  std::int64_t seq = -1;
  bool operator==(const RecordId&) const = default;
};

// ---- a connection: correlation ids matched to exactly one response ---------------------------

enum class Kind { metadata, produce, fetch };

class Conn {
 public:
  using OnResponse = std::function<void(Kind, pb::ByteView payload, Clock::time_point sent)>;

  Conn(asio::io_context& io, std::string name, Failures& failures)
      : socket_(io), name_(std::move(name)), failures_(failures) {}

  void connect(std::uint16_t port, std::function<void()> on_connected, OnResponse on_response) {
    on_response_ = std::move(on_response);
    socket_.async_connect({asio::ip::make_address("127.0.0.1"), port},
                          [this, f = std::move(on_connected)](const error_code& ec) {
                            if (ec) {
                              failures_.add(fmt::format("{}: connect: {}", name_, ec.message()));
                              return;
                            }
                            socket_.set_option(asio::ip::tcp::no_delay(true));
                            read_size();
                            f();
                          });
  }
  template <class Req>
  void send(const Req& req, std::int16_t version, Kind kind) {
    const std::int32_t corr = next_corr_++;
    if (!outstanding_.emplace(corr, Pending{kind, Clock::now()}).second) {
      failures_.add(fmt::format("{}: correlation id {} reused", name_, corr));
    }
    queue_.push_back(pb::encode_request(req, version, corr, name_));
    write();
  }
  [[nodiscard]] std::size_t outstanding() const { return outstanding_.size(); }
  void close() {
    error_code ec;
    socket_.close(ec);
  }

 private:
  struct Pending {
    Kind kind;
    Clock::time_point sent;
  };

  void write() {
    if (writing_ || queue_.empty() || !socket_.is_open()) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(queue_.front()),
                      [this](const error_code& ec, std::size_t) {
                        writing_ = false;
                        queue_.pop_front();
                        if (ec) {
                          if (socket_.is_open())
                            failures_.add(fmt::format("{}: write: {}", name_, ec.message()));
                          return;
                        }
                        write();
                      });
  }
  void read_size() {
    asio::async_read(socket_, asio::buffer(prefix_), [this](const error_code& ec, std::size_t) {
      if (ec) return on_error(ec);
      std::int32_t size = 0;
      try {
        size =
            pb::decode_frame_size(prefix_, pb::kDefaultMaxFrameBytes, pb::kMinResponseFrameBytes);
      } catch (const std::exception& e) {
        failures_.add(fmt::format("{}: {}", name_, e.what()));
        return close();
      }
      payload_.resize(static_cast<std::size_t>(size));
      asio::async_read(socket_, asio::buffer(payload_), [this](const error_code& e, std::size_t) {
        if (e) return on_error(e);
        on_frame();
        read_size();
      });
    });
  }
  void on_frame() {
    pb::Reader r(payload_);
    const std::int32_t corr = r.read_int32("correlation_id");
    const auto it = outstanding_.find(corr);
    if (it == outstanding_.end()) {
      failures_.add(
          fmt::format("{}: response for unknown or answered correlation id {}", name_, corr));
      return;
    }
    const Pending p = it->second;
    outstanding_.erase(it);
    try {
      on_response_(p.kind, payload_, p.sent);
    } catch (const std::exception& e) {
      failures_.add(fmt::format("{}: bad response (corr {}): {}", name_, corr, e.what()));
    }
  }
  void on_error(const error_code& ec) {
    if (!socket_.is_open() || ec == asio::error::operation_aborted) return;
    failures_.add(fmt::format("{}: connection lost: {}", name_, ec.message()));
    close();
  }

  asio::ip::tcp::socket socket_;
  std::string name_;
  Failures& failures_;
  OnResponse on_response_;
  std::int32_t next_corr_ = 1;
  std::unordered_map<std::int32_t, Pending> outstanding_;
  std::deque<pb::Bytes> queue_;
  bool writing_ = false;
  std::array<std::uint8_t, 4> prefix_{};
  pb::Bytes payload_;
};

// ---- the load --------------------------------------------------------------------------------

class Load {
 public:
  Load(const Options& o, std::uint16_t port) : o_(o), port_(port) {
    log_.resize(static_cast<std::size_t>(o.partitions));
    acked_.resize(static_cast<std::size_t>(o.partitions));
  }

  // Runs the whole scenario on this thread; `sample_rss` is called every second and at warm-up.
  void run(const std::function<void(bool warmup_point)>& sample_rss) {
    const auto start = Clock::now();
    const auto hard_deadline =
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(o_.duration_s + 2 * o_.drain_s + 30));
    // Metadata first: it creates the topic, so no consumer ever sees UNKNOWN_TOPIC.
    setup_ = std::make_unique<Conn>(io_, "setup", failures_);
    setup_->connect(
        port_,
        [this] {
          pb::MetadataRequest m;
          m.topics = std::vector<std::string>{kTopic};
          setup_->send(m, kMetadataVersion, Kind::metadata);
        },
        [this](Kind, pb::ByteView, Clock::time_point) { start_load(); });

    asio::steady_timer tick(io_);
    int seconds = 0;
    std::function<void()> on_tick = [&] {
      tick.expires_after(std::chrono::seconds(1));
      tick.async_wait([&](const error_code& ec) {
        if (ec) return;
        ++seconds;
        const double elapsed = std::chrono::duration<double>(Clock::now() - load_start_).count();
        const bool warm = started_ && !warmed_ && elapsed >= std::max(2.0, o_.duration_s / 4);
        if (warm) warmed_ = true;
        sample_rss(warm);
        if (started_ && !stopping_ && elapsed >= o_.duration_s) begin_drain();
        if (Clock::now() > hard_deadline) {
          failures_.add("hard deadline passed: giving up");
          return finish();
        }
        on_tick();
      });
    };
    on_tick();
    poll_timer_ = std::make_unique<asio::steady_timer>(io_);
    io_.run();
    elapsed_s_ = std::chrono::duration<double>(measured_end_ - load_start_).count();
  }

  void verify_and_print(long rss_warm, long rss_end, long rss_max) {
    std::uint64_t unanswered = 0;
    for (const auto& c : consumers_)
      unanswered += c->conn.outstanding();
    for (const auto& p : producers_)
      unanswered += p->conn.outstanding();
    if (unanswered > 0) failures_.add(fmt::format("{} request(s) never answered", unanswered));
    // Exactly once: the acked batches tile each partition's log, and match what was consumed.
    std::uint64_t acked_records = 0;
    for (std::size_t part = 0; part < acked_.size(); ++part) {
      std::vector<bool> covered(log_[part].size(), false);
      for (const Acked& a : acked_[part]) {
        for (std::int64_t i = 0; i < a.count; ++i) {
          const auto off = static_cast<std::size_t>(a.base_offset + i);
          if (off >= log_[part].size()) {
            failures_.add(fmt::format("partition {}: acked offset {} never consumed", part, off));
            break;
          }
          if (covered[off])
            failures_.add(fmt::format("partition {}: offset {} acked twice", part, off));
          covered[off] = true;
          if (!(log_[part][off] == RecordId{a.producer, a.first_seq + i})) {
            failures_.add(
                fmt::format("partition {}: offset {} holds another record than acked", part, off));
          }
        }
        acked_records += static_cast<std::uint64_t>(a.count);
      }
      const auto unacked = std::count(covered.begin(), covered.end(), false);
      if (unacked > 0)
        failures_.add(
            fmt::format("partition {}: {} consumed record(s) never acked", part, unacked));
    }
    for (const auto& c : consumers_) {
      const std::size_t end = log_[static_cast<std::size_t>(c->partition)].size();
      if (static_cast<std::size_t>(c->next_offset) != end) {
        failures_.add(
            fmt::format("consumer {} stopped at offset {} of {}", c->index, c->next_offset, end));
      }
    }
    const double rps = static_cast<double>(stats_.responses) / elapsed_s_;
    fmt::print(
        "broker_load: {} consumer connections, {} producers, {} partitions, {:.1f} s under load\n",
        o_.connections, o_.producers, o_.partitions, elapsed_s_);
    fmt::print(
        "  requests answered: {} ({:.0f}/s): {} produce, {} fetch ({} empty: long poll expired)\n",
        stats_.responses, rps, stats_.produce_responses, stats_.fetch_responses,
        stats_.empty_fetches);
    fmt::print("  records: {} acked, {} consumed (every consumer of a partition reads all of it)\n",
               acked_records, stats_.records_consumed);
    fmt::print("  produce latency (acks={}):          {}\n", o_.acks,
               percentiles(stats_.produce_us));
    fmt::print("  fetch time to data (send->consume): {}\n", percentiles(stats_.time_to_data_us));
    fmt::print("  fetch response time (incl. wait):   {}\n", percentiles(stats_.fetch_us));
    const bool flat = rss_end <= rss_warm + std::max(rss_warm / 5, o_.rss_slack_mib * 1024);
    fmt::print(
        "  broker RSS: {:.1f} MiB after warm-up, {:.1f} MiB at the end, {:.1f} MiB max: {}\n",
        rss_warm / 1024.0, rss_end / 1024.0, rss_max / 1024.0, flat ? "flat" : "GREW");
    if (!flat) {
      failures_.add(
          fmt::format("broker RSS grew past warm-up + max(20%, {} MiB)", o_.rss_slack_mib));
    }
  }

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
  struct Acked {
    std::int64_t base_offset;
    std::int32_t producer;
    std::int64_t first_seq;
    std::int64_t count;
  };

  void start_load() {
    started_ = true;
    load_start_ = Clock::now();
    setup_->close();
    for (int i = 0; i < o_.connections; ++i) {
      auto& c = *consumers_.emplace_back(
          std::make_unique<Consumer>(io_, i, i % o_.partitions, failures_));
      c.conn.connect(
          port_, [this, &c] { fetch(c); },
          [this, &c](Kind, pb::ByteView p, Clock::time_point sent) { on_fetch(c, p, sent); });
    }
    for (int i = 0; i < o_.producers; ++i) {
      auto& p = *producers_.emplace_back(std::make_unique<Producer>(io_, i, failures_));
      p.conn.connect(
          port_, [this, &p] { produce_tick(p); },
          [this, &p](Kind, pb::ByteView b, Clock::time_point sent) { on_produce(p, b, sent); });
    }
  }

  void fetch(Consumer& c) {
    pb::FetchRequest req;
    req.max_wait_ms = o_.max_wait_ms;
    req.min_bytes = 1;
    req.max_bytes = 1 << 20;
    req.topics.push_back({kTopic, {{c.partition, c.next_offset, 1 << 20}}});
    c.conn.send(req, kFetchVersion, Kind::fetch);
  }

  void on_fetch(Consumer& c, pb::ByteView payload, Clock::time_point sent) {
    const auto now = Clock::now();
    ++stats_.responses;
    ++stats_.fetch_responses;
    stats_.fetch_us.push_back(micros(now - sent));
    const auto resp = pb::decode_response<pb::FetchResponse>(payload, kFetchVersion);
    const auto& part = resp.body.responses.at(0).partitions.at(0);
    if (part.error_code != pb::Errc::none) {
      failures_.add(fmt::format("consumer {}: fetch error {} at offset {}", c.index,
                                static_cast<int>(part.error_code), c.next_offset));
      return;  // this consumer stops; verify() reports it short
    }
    const auto records =
        part.records ? pb::parse_record_batches(*part.records) : std::vector<pb::ConsumerRecord>{};
    if (records.empty()) ++stats_.empty_fetches;
    auto& log = log_[static_cast<std::size_t>(c.partition)];
    for (const pb::ConsumerRecord& r : records) {
      if (r.offset < c.next_offset) continue;  // a batch starting before the fetch offset
      if (r.offset != c.next_offset) {
        failures_.add(fmt::format("consumer {}: gap: offset {} after {}", c.index, r.offset,
                                  c.next_offset - 1));
        return;
      }
      RecordId id;
      long long send_ns = 0;
      if (!r.value ||
          std::sscanf(r.value->c_str(), "%d:%ld:%lld", &id.producer, &id.seq, &send_ns) != 3) {
        failures_.add(fmt::format("consumer {}: unreadable value at offset {}", c.index, r.offset));
        return;
      }
      auto [it, fresh] = c.last_seq.emplace(id.producer, id.seq);
      if (!fresh) {
        if (id.seq <= it->second) {
          failures_.add(
              fmt::format("consumer {}: producer {} seq {} after {} (out of order or duplicate)",
                          c.index, id.producer, id.seq, it->second));
        }
        it->second = id.seq;
      }
      const auto off = static_cast<std::size_t>(r.offset);
      if (off == log.size()) {
        log.push_back(id);
      } else if (!(log[off] == id)) {
        failures_.add(
            fmt::format("consumer {}: offset {} differs from another consumer's", c.index, off));
      }
      ++c.next_offset;
      ++stats_.records_consumed;
      stats_.time_to_data_us.push_back(
          micros(now.time_since_epoch() - std::chrono::nanoseconds(send_ns)));
    }
    if (producers_drained() && c.next_offset >= target_end(c.partition)) {
      c.done = true;
      maybe_finish();
      return;
    }
    fetch(c);
  }

  void produce_tick(Producer& p) {
    if (stopping_) return;
    if (p.conn.outstanding() < static_cast<std::size_t>(o_.producer_in_flight)) {
      const int part = p.next_partition;
      p.next_partition = (p.next_partition + 1) % o_.partitions;
      const long long now_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count();
      std::vector<pb::ProducerRecord> recs;
      for (int i = 0; i < o_.batch_records; ++i) {
        recs.push_back({std::nullopt, fmt::format("{}:{}:{}", p.index, p.next_seq + i, now_ns)});
      }
      pb::ProduceRequest req;
      req.acks = static_cast<std::int16_t>(o_.acks);
      req.timeout_ms = 30000;
      req.topics.push_back({kTopic, {{part, pb::build_record_batch(recs, now_ns / 1'000'000)}}});
      p.sent.push_back({part, p.next_seq, o_.batch_records});
      p.next_seq += o_.batch_records;
      p.conn.send(req, kProduceVersion, Kind::produce);
    }
    p.timer.expires_after(std::chrono::microseconds(1'000'000 / std::max(1, o_.produce_rate)));
    p.timer.async_wait([this, &p](const error_code& ec) {
      if (!ec) produce_tick(p);
    });
  }

  void on_produce(Producer& p, pb::ByteView payload, Clock::time_point sent) {
    ++stats_.responses;
    ++stats_.produce_responses;
    stats_.produce_us.push_back(micros(Clock::now() - sent));
    const auto resp = pb::decode_response<pb::ProduceResponse>(payload, kProduceVersion);
    const auto& part = resp.body.responses.at(0).partitions.at(0);
    if (p.sent.empty()) throw std::runtime_error("produce response with nothing sent");
    const auto [partition, first_seq, count] = p.sent.front();
    p.sent.pop_front();
    if (part.error_code != pb::Errc::none || part.index != partition) {
      failures_.add(fmt::format("producer {}: produce error {} on partition {}", p.index,
                                static_cast<int>(part.error_code), part.index));
    } else {
      acked_[static_cast<std::size_t>(partition)].push_back(
          Acked{part.base_offset, p.index, first_seq, count});
    }
    maybe_finish();
  }

  [[nodiscard]] std::int64_t target_end(int partition) const {
    std::int64_t end = 0;
    for (const Acked& a : acked_[static_cast<std::size_t>(partition)])
      end = std::max(end, a.base_offset + a.count);
    return end;
  }

  void begin_drain() {
    stopping_ = true;
    drain_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(o_.drain_s));
    for (auto& p : producers_)
      p->timer.cancel();
    poll_drain();
  }
  // Producers' last answers first, then every consumer reads to its partition's end.
  void poll_drain() {
    poll_timer_->expires_after(std::chrono::milliseconds(50));
    poll_timer_->async_wait([this](const error_code& ec) {
      if (ec) return;
      if (Clock::now() > drain_deadline_) {
        failures_.add("drain: not every request answered / record consumed within the drain time");
        return finish();
      }
      maybe_finish();
      if (!finished_) poll_drain();
    });
  }
  // Every producer stopped and got its last answer: the acked offsets are final.
  [[nodiscard]] bool producers_drained() const {
    if (!stopping_) return false;
    return std::all_of(producers_.begin(), producers_.end(),
                       [](const auto& p) { return p->conn.outstanding() == 0; });
  }
  void maybe_finish() {
    if (finished_ || !producers_drained()) return;
    bool all_done = true;
    for (const auto& c : consumers_) {
      if (c->done) continue;
      if (c->conn.outstanding() > 0 || c->next_offset < target_end(c->partition)) {
        all_done = false;
        continue;
      }
      c->done = true;  // at the end already, its last fetch answered: nothing more to send
    }
    if (all_done) finish();
  }
  void finish() {
    finished_ = true;
    measured_end_ = Clock::now();
    on_finish_rss_();
    io_.stop();
  }

 public:
  std::function<void()> on_finish_rss_;

 private:
  const Options& o_;
  std::uint16_t port_;
  asio::io_context io_;
  Failures failures_;
  Stats stats_;
  std::unique_ptr<Conn> setup_;
  std::vector<std::unique_ptr<Consumer>> consumers_;
  std::vector<std::unique_ptr<Producer>> producers_;
  std::vector<std::vector<RecordId>> log_;  // per partition: what consumers read, by offset
  std::vector<std::vector<Acked>> acked_;   // per partition: what producers were told
  std::unique_ptr<asio::steady_timer> poll_timer_;
  bool started_ = false, warmed_ = false, stopping_ = false, finished_ = false;
  Clock::time_point load_start_ = Clock::now(), measured_end_ = Clock::now(), drain_deadline_;
  double elapsed_s_ = 0;
};

void raise_fd_limit(int needed) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < static_cast<rlim_t>(needed)) {
    throw std::runtime_error(
        fmt::format("RLIMIT_NOFILE is {} (hard), {} sockets needed", lim.rlim_cur, needed));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "broker_load: many long-polling consumers and a few producers against the "
      "demo_broker binary; checks exactly-once, in-order, one response per request "
      "and a flat broker RSS; prints requests/s and latency percentiles."};
  Options o;
  app.add_option("--broker-bin", o.broker_bin, "the demo_broker binary to start")->required();
  app.add_option("--broker-args", o.broker_args, "extra demo_broker arguments")
      ->capture_default_str();
  app.add_option("--connections", o.connections, "consumer connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--producers", o.producers, "producer connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--partitions", o.partitions, "partitions of the topic")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--duration", o.duration_s, "seconds of load")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--produce-rate", o.produce_rate, "produce requests/s per producer")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--batch-records", o.batch_records, "records per produce request")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--producer-in-flight", o.producer_in_flight, "pipelined produces per producer")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--acks", o.acks, "produce acks (1 or -1)")
      ->capture_default_str()
      ->check(CLI::IsMember({1, -1}));
  app.add_option("--max-wait-ms", o.max_wait_ms, "fetch long-poll wait")
      ->capture_default_str()
      ->check(CLI::Range(1, 60000));
  app.add_option("--rss-slack-mib", o.rss_slack_mib,
                 "RSS growth allowed after warm-up, beyond 20% (sanitizer builds need more)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--drain", o.drain_s, "seconds allowed after the load for the last answers")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 600.0));
  CLI11_PARSE(app, argc, argv);
  try {
    raise_fd_limit(o.connections + o.producers + 64);
    BrokerProcess broker(o);
    fmt::print("broker_load: demo_broker pid-child on 127.0.0.1:{}, RSS {:.1f} MiB at start\n",
               broker.port(), broker.rss_kib() / 1024.0);
    Load load(o, broker.port());
    long rss_warm = 0, rss_end = 0, rss_max = 0;
    load.on_finish_rss_ = [&] { rss_end = broker.rss_kib(); };
    load.run([&](bool warm) {
      const long rss = broker.rss_kib();
      rss_max = std::max(rss_max, rss);
      if (warm) rss_warm = rss;
    });
    if (rss_warm == 0) rss_warm = rss_end;  // the run ended before warm-up (failure already noted)
    load.verify_and_print(rss_warm, rss_end, rss_max);
    if (const std::string exit = broker.stop(); !exit.empty()) {
      load.failures().add("broker after SIGTERM: " + exit);
    }
    const Failures& f = load.failures();
    if (f.count == 0) {
      fmt::print(
          "broker_load: PASS: every request answered once, every acked record consumed "
          "exactly once and in order by every consumer of its partition\n");
      return 0;
    }
    fmt::print("broker_load: FAIL: {} failure(s), the first ones:\n", f.count);
    for (const std::string& s : f.first)
      fmt::print("  {}\n", s);
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "broker_load: {}\n", e.what());
    return 2;
  }
}
