// The demo broker under faults, in-process on a free loopback port: clients that die in the
// middle of a request (RST, not FIN), a client that stops reading while the broker writes large
// fetch responses, a shutdown with requests parked, and throwing timer tasks and delayed
// operations on the broker's own timer setup (an AsioTimer on the io thread).
//
// The invariant every case checks, counting: a request's parked operation is released exactly
// once, whoever leaves first (the purgatory's delayed() and watched() return to 0, and
// abandoned_operations counts it), and the broker keeps serving the other clients.
#include "server/broker.hpp"

#include <chrono>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/write.hpp>

#include "../demo_broker/broker_test_util.hpp"
#include "demo/client.hpp"
#include "protocol/record_batch.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/timer/asio.hpp"
#include "requests/partition_purgatory.hpp"
#include "server/broker_runner.hpp"

namespace asio = boost::asio;
namespace pb = purgatory::broker;
using pb::test::values;
using pb::test::wait_until;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t kMiB = 1024 * 1024;
const std::string kTopic = "faults";

// A client the codec-based Client cannot be: it writes raw bytes and dies with an RST
// (SO_LINGER 0), as a killed process or a crashed host's TCP stack does. Never reads.
class RawPeer {
 public:
  explicit RawPeer(std::uint16_t port, int receive_buffer_bytes = 0) : socket_(io_) {
    socket_.open(asio::ip::tcp::v4());
    if (receive_buffer_bytes > 0) {
      socket_.set_option(asio::socket_base::receive_buffer_size(receive_buffer_bytes));
    }
    socket_.connect({asio::ip::make_address("127.0.0.1"), port});
  }
  template <class Req>
  void send(const Req& req, std::int16_t version, std::int32_t correlation_id) {
    write(pb::encode_request(req, version, correlation_id, std::string("raw-peer")));
  }
  void write(pb::ByteView bytes) { asio::write(socket_, asio::buffer(bytes.data(), bytes.size())); }
  // Closes with an RST: whatever the broker still writes is refused.
  void reset() {
    socket_.set_option(asio::socket_base::linger(true, 0));
    socket_.close();
  }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

pb::FetchRequest fetch_request(std::int32_t partition, std::int64_t offset,
                               std::int32_t max_wait_ms, std::int32_t max_bytes = 1 << 20) {
  pb::FetchRequest req;
  req.max_wait_ms = max_wait_ms;
  req.min_bytes = 1;
  req.max_bytes = max_bytes;
  req.topics.push_back({kTopic, {{partition, offset, max_bytes}}});
  return req;
}

pb::ProduceRequest produce_request(std::int32_t partition, std::int16_t acks,
                                   std::initializer_list<const char*> vs) {
  pb::ProduceRequest req;
  req.acks = acks;
  req.timeout_ms = 30000;
  const auto recs = values(vs);
  req.topics.push_back({kTopic, {{partition, pb::build_record_batch(recs, 0)}}});
  return req;
}

// This process's resident memory (the in-process broker's included), in bytes.
std::size_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      std::size_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

struct Broker {
  pb::test::LogCapture log;
  pb::BrokerRunner runner;

  explicit Broker(const std::function<void(pb::BrokerConfig&)>& tweak = {})
      : runner(configure(log, tweak)) {}
  static pb::BrokerConfig configure(pb::test::LogCapture& log,
                                    const std::function<void(pb::BrokerConfig&)>& tweak) {
    pb::BrokerConfig c = pb::test::test_config(log);
    c.verbose = false;  // thousands of requests in some cases
    c.partitions = 2;
    if (tweak) tweak(c);
    return c;
  }
  [[nodiscard]] pb::BrokerMetrics metrics() const { return runner.metrics(); }
  [[nodiscard]] std::uint16_t port() const { return runner.port(); }
};

// The broker serves a fresh client end to end: produce acks=1, read it back.
void check_still_serving(const Broker& b, std::int32_t partition) {
  pb::Client c("healthy");
  c.connect("127.0.0.1", b.port());
  const auto r = c.produce_one(kTopic, partition, values({"still-here"}), 1);
  REQUIRE(r.error_code == pb::Errc::none);
  const auto p = c.fetch_one(kTopic, partition, r.base_offset, 5000, 1);
  REQUIRE(p.error_code == pb::Errc::none);
  REQUIRE(p.records.has_value());
  const auto recs = pb::parse_record_batches(*p.records);
  REQUIRE(!recs.empty());
  CHECK(recs.front().value == "still-here");
}

}  // namespace

TEST_CASE(
    "100 clients killed by RST with a Fetch parked: the fetch purgatory empties, 100 "
    "abandoned, the broker still serves") {
  Broker b;
  pb::Client setup;
  setup.connect("127.0.0.1", b.port());
  REQUIRE(setup.produce_one(kTopic, 0, values({"x"}), 1).error_code == pb::Errc::none);

  constexpr int kPeers = 100;
  std::vector<std::unique_ptr<RawPeer>> peers;
  for (int i = 0; i < kPeers; ++i) {
    peers.push_back(std::make_unique<RawPeer>(b.port()));
    peers.back()->send(fetch_request(0, 1, 30000), pb::kFetchVersion, i + 1);  // at the log end
  }
  REQUIRE(wait_until([&] { return b.metrics().fetch.delayed == kPeers; }));
  CHECK(b.metrics().fetch.watched == kPeers);
  for (auto& p : peers)
    p->reset();
  REQUIRE(wait_until([&] {
    const auto m = b.metrics();
    return m.fetch.delayed == 0 && m.fetch.watched == 0 && m.connections_open == 1;
  }));
  CHECK(b.metrics().abandoned_operations == kPeers);
  check_still_serving(b, 0);
  CHECK(b.metrics().fetch.delayed == 0);
}

TEST_CASE(
    "a client killed by RST while its acks=-1 Produce waits for a follower (300 ms): the "
    "produce purgatory empties and the record is still served once replicated") {
  Broker b([](pb::BrokerConfig& c) { c.replication_delays = {milliseconds(300)}; });
  RawPeer peer(b.port());
  peer.send(produce_request(0, -1, {"orphan"}), pb::kProduceVersion, 1);
  REQUIRE(wait_until([&] { return b.metrics().produce.delayed == 1; }));
  peer.reset();
  REQUIRE(wait_until([&] {
    const auto m = b.metrics();
    return m.produce.delayed == 0 && m.produce.watched == 0 && m.connections_open == 0;
  }));
  CHECK(b.metrics().abandoned_operations == 1);
  pb::Client c;
  c.connect("127.0.0.1", b.port());
  const auto p = c.fetch_one(kTopic, 0, 0, 5000, 1);  // parks until the follower catches up
  REQUIRE(p.error_code == pb::Errc::none);
  REQUIRE(p.records.has_value());
  const auto recs = pb::parse_record_batches(*p.records);
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].value == "orphan");
}

TEST_CASE(
    "a client killed by RST after a parked Fetch, a Produce and a Fetch pipelined behind "
    "it: every operation is released, the produced record stays") {
  Broker b;
  pb::Client setup;
  setup.connect("127.0.0.1", b.port());
  REQUIRE(setup.produce_one(kTopic, 1, values({"a"}), 1).error_code == pb::Errc::none);
  RawPeer peer(b.port());
  peer.send(fetch_request(1, 1, 30000), pb::kFetchVersion, 1);  // parks on partition 1
  peer.send(produce_request(0, 1, {"behind"}), pb::kProduceVersion, 2);
  peer.send(fetch_request(0, 0, 30000), pb::kFetchVersion, 3);  // answered, held behind corr 1
  REQUIRE(wait_until([&] { return b.metrics().requests == 4 && b.metrics().fetch.delayed == 1; }));
  peer.reset();
  REQUIRE(wait_until([&] {
    const auto m = b.metrics();
    return m.fetch.delayed == 0 && m.fetch.watched == 0 && m.connections_open == 1;
  }));
  const auto p = setup.fetch_one(kTopic, 0, 0, 1000, 1);
  REQUIRE(p.records.has_value());
  CHECK(pb::parse_record_batches(*p.records).at(0).value == "behind");
}

TEST_CASE(
    "a client killed by RST halfway through a request frame costs nothing: the broker "
    "serves the next client") {
  Broker b;
  const pb::Bytes frame =
      pb::encode_request(produce_request(0, 1, {"half"}), pb::kProduceVersion, 1, "half");
  RawPeer peer(b.port());
  peer.write(pb::ByteView(frame).first(frame.size() / 2));
  REQUIRE(wait_until([&] { return b.metrics().connections_accepted == 1; }));
  peer.reset();
  REQUIRE(wait_until([&] { return b.metrics().connections_open == 0; }));
  CHECK(b.metrics().requests == 0);  // the half frame was never handled
  check_still_serving(b, 0);
}

namespace {

// Fills partition 0 with `bytes` of records in 1 MiB batches.
void fill_partition(const Broker& b, std::size_t bytes) {
  pb::Client producer("filler");
  producer.connect("127.0.0.1", b.port());
  std::vector<pb::ProducerRecord> recs(
      16, pb::ProducerRecord{std::nullopt, std::string(64 * 1024, 'v')});
  for (std::size_t done = 0; done < bytes; done += kMiB) {
    REQUIRE(producer.produce_one(kTopic, 0, recs, 1).error_code == pb::Errc::none);
  }
}

// The highest RSS seen over `span` (allocations made by the io thread may lag a little).
std::size_t peak_rss_over(milliseconds span) {
  std::size_t peak = rss_bytes();
  const auto end = std::chrono::steady_clock::now() + span;
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(20));
    peak = std::max(peak, rss_bytes());
  }
  return peak;
}

}  // namespace

TEST_CASE(
    "a client that stops reading one 24 MiB fetch response holds at most a few copies of "
    "it in the broker, and other clients are still served") {
  constexpr std::size_t kLog = 24 * kMiB;
  Broker b;
  fill_partition(b, kLog);
  const std::size_t before = peak_rss_over(milliseconds(100));
  RawPeer stuck(b.port(), 64 * 1024);
  stuck.send(fetch_request(0, 0, 100, 64 << 20), pb::kFetchVersion, 1);
  REQUIRE(
      wait_until([&] { return b.metrics().connections_open == 1 && b.metrics().requests >= 25; }));
  check_still_serving(b, 1);
  const std::size_t grown = peak_rss_over(milliseconds(300)) - std::min(before, rss_bytes());
  MESSAGE("RSS grew by " << grown / kMiB << " MiB for one unread 24 MiB response");
  // The response frame (24 MiB) plus the records' transient copy while it is built.
  // Under a sanitizer its shadow memory is resident too (TSan: about 2x more).
  CHECK(grown < (pb::test::kSanitized ? 6 : 3) * kLog);
  stuck.reset();
  REQUIRE(wait_until([&] { return b.metrics().connections_open == 0; }));
}

// Guards the deferred encoding of fetch responses (Connection::respond_deferred). A connection
// reads up to max_in_flight_per_connection (64) requests; a Fetch that completes fills its slot
// with a builder, which the connection runs only when the slot reaches the head of its queue and
// no write is in flight. So 16 unread Fetches of a 24 MiB log cost the one response being written
// (plus the records' transient copy while it was built), not 16 x 24 MiB.
TEST_CASE(
    "a client that pipelines 16 fetches of a 24 MiB log and never reads costs the broker "
    "a bounded amount of memory (< 4 responses)") {
  constexpr std::size_t kLog = 24 * kMiB;
  constexpr int kFetches = 16;
  Broker b;
  fill_partition(b, kLog);
  const std::size_t before = peak_rss_over(milliseconds(100));
  RawPeer stuck(b.port(), 64 * 1024);
  for (int i = 0; i < kFetches; ++i)
    stuck.send(fetch_request(0, 0, 100, 64 << 20), pb::kFetchVersion, i + 1);
  REQUIRE(wait_until([&] { return b.metrics().requests >= 24 + kFetches; }));
  check_still_serving(b, 1);
  const std::size_t grown = peak_rss_over(milliseconds(500)) - std::min(before, rss_bytes());
  MESSAGE("RSS grew by " << grown / kMiB << " MiB for " << kFetches << " unread 24 MiB responses");
  // Measured: release +25 MiB, ASan +44 MiB, TSan +72 MiB (its shadow memory is resident too: the
  // one-response case above grows as much there). The sanitizer bound leaves TSan 2x headroom and
  // is still far below what encoding each Fetch as it completed cost (release +391 MiB, TSan
  // +1153 MiB).
  CHECK(grown < (pb::test::kSanitized ? 6 : 4) * kLog);
  stuck.reset();
  REQUIRE(wait_until([&] { return b.metrics().connections_open == 0; }));
}

TEST_CASE(
    "stopping the broker with 20 Fetches and 5 acks=-1 Produces parked closes every "
    "connection within 5 s and leaves both purgatories empty") {
  Broker b([](pb::BrokerConfig& c) { c.replication_delays = {std::chrono::seconds(60)}; });
  pb::Client setup;
  setup.connect("127.0.0.1", b.port());
  REQUIRE(setup.produce_one(kTopic, 0, values({"x"}), 1).error_code == pb::Errc::none);
  std::vector<std::unique_ptr<pb::Client>> clients;
  for (int i = 0; i < 20; ++i) {
    auto& c = *clients.emplace_back(std::make_unique<pb::Client>());
    c.connect("127.0.0.1", b.port());
    c.send(fetch_request(0, 0, 30000), pb::kFetchVersion);  // HW is 0 until the follower: parks
  }
  for (int i = 0; i < 5; ++i) {
    auto& c = *clients.emplace_back(std::make_unique<pb::Client>());
    c.connect("127.0.0.1", b.port());
    c.send(produce_request(1, -1, {"waiting"}), pb::kProduceVersion);
  }
  REQUIRE(wait_until([&] {
    const auto m = b.metrics();
    return m.fetch.delayed == 20 && m.produce.delayed == 5;
  }));
  const auto t0 = std::chrono::steady_clock::now();
  b.runner.stop();
  for (auto& c : clients) {
    CHECK(c->closed_by_peer_within(std::chrono::seconds(5)));  // no response, a clean close
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  const auto m = b.metrics();
  CHECK(m.fetch.delayed == 0);
  CHECK(m.fetch.watched == 0);
  CHECK(m.produce.delayed == 0);
  CHECK(m.produce.watched == 0);
  CHECK(m.connections_open == 0);
  CHECK(m.fetch.shut_down_total + m.fetch.completed_total == 20);
}

TEST_CASE(
    "on the broker's timer setup (an AsioTimer, one io thread), a throwing "
    "timer task and throwing delayed operations are reported and the rest still run") {
  asio::io_context io;
  std::vector<std::string> task_errors;
  std::vector<std::string> op_errors;  // both written on the io thread only
  auto timer = std::make_shared<purgatory::AsioTimer>(
      io, purgatory::TimerOptions{
              .name = "broker",
              .on_task_error = [&](const purgatory::TimerTask&, std::exception_ptr e) {
                try {
                  std::rethrow_exception(e);
                } catch (const std::exception& ex) {
                  task_errors.emplace_back(ex.what());
                }
              }});
  purgatory::PurgatoryOptions options;
  options.name = "fetch";
  options.shards = 1;
  options.on_callback_error = [&](const purgatory::DelayedOperation&, std::exception_ptr e,
                                  std::string_view where) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      op_errors.push_back(std::string(where) + ": " + ex.what());
    }
  };
  auto purgatory = std::make_unique<pb::Purgatory>(timer, std::move(options));
  const pb::TopicPartition key{"t", 0};
  int ran = 0;
  timer->add(purgatory::make_task([] { throw std::runtime_error("task boom"); }), milliseconds(2));
  timer->add(purgatory::make_task([&] { ++ran; }), milliseconds(5));
  const auto throws_on_complete = purgatory::make_operation(
      milliseconds(3), [] { return false; }, [] { throw std::runtime_error("complete boom"); });
  const auto throws_on_expiration = purgatory::make_operation(
      milliseconds(3), [] { return false; }, [] {},
      [] { throw std::runtime_error("expiration boom"); });
  int completed = 0;
  const auto healthy = purgatory::make_operation(
      milliseconds(8), [] { return false; }, [&] { ++completed; });
  const std::vector<pb::TopicPartition> keys{key};
  for (const auto& op : {throws_on_complete, throws_on_expiration, healthy})
    CHECK_FALSE(purgatory->try_complete_else_watch(op, keys));
  // Run until the healthy ones are done (bounded); the io thread must survive the throws.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((ran < 1 || completed < 1) && std::chrono::steady_clock::now() < deadline) {
    io.run_for(milliseconds(10));
    io.restart();
  }
  CHECK(ran == 1);
  CHECK(completed == 1);
  CHECK(task_errors == std::vector<std::string>{"task boom"});
  CHECK(op_errors.size() == 2);
  CHECK(purgatory->num_delayed() == 0);
  CHECK(purgatory->watched() == 0);
  purgatory->shutdown();
  (void)timer->close();
  io.run_for(milliseconds(50));
}
