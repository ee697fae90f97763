#include "demo/demo.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "demo/client.hpp"
#include "group_scenario.hpp"
#include "idempotent_scenario.hpp"
#include "server/broker_runner.hpp"

namespace purgatory::broker {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kFastFollower = kDemoFollowerDelays[0];
constexpr milliseconds kSlowFollower = kDemoFollowerDelays[1];

// Lines from the demo's thread and from the broker's io thread, stamped from the scenario start.
// Thread-safe.
class Timeline {
 public:
  explicit Timeline(std::FILE* out) : out_(out) {}

  void restart() {
    const std::lock_guard<std::mutex> lock(mu_);
    start_ = Clock::now();
  }
  void at(std::string_view who, std::string_view what) {
    const std::lock_guard<std::mutex> lock(mu_);
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    fmt::print(out_, "  +{:6.3f}s  {:<9} {}\n", s, who, what);
    std::fflush(out_);
  }
  void say(std::string_view text) {
    const std::lock_guard<std::mutex> lock(mu_);
    fmt::print(out_, "{}\n", text);
    std::fflush(out_);
  }

 private:
  std::mutex mu_;
  std::FILE* out_;
  Clock::time_point start_ = Clock::now();
};

// Counts the scenarios' checks and prints each verdict.
class Verdicts {
 public:
  explicit Verdicts(Timeline& timeline) : timeline_(timeline) {}
  void check(bool ok, std::string_view what) {
    timeline_.say(fmt::format("  {} {}", ok ? "ok  " : "FAIL", what));
    if (!ok) ++failed_;
  }
  [[nodiscard]] int failed() const noexcept { return failed_; }

 private:
  Timeline& timeline_;
  int failed_ = 0;
};

// How much slower than the scripted pace the scenarios play (>= 1), and the suffix of their
// topics (a replay from the live view gets fresh topics, so its fetches start from empty logs).
struct Pace {
  double factor = 1;
  std::string suffix;
  [[nodiscard]] milliseconds operator()(milliseconds d) const {
    return milliseconds(static_cast<milliseconds::rep>(static_cast<double>(d.count()) * factor));
  }
  [[nodiscard]] std::string topic(std::string_view name) const {
    return std::string(name) + suffix;
  }
};

std::vector<ProducerRecord> records(int n, std::size_t value_bytes, std::string_view tag) {
  std::vector<ProducerRecord> out;
  for (int i = 0; i < n; ++i) {
    std::string value = fmt::format("{}-{} ", tag, i);
    value.resize(value_bytes, '.');
    out.push_back({fmt::format("k{}", i), std::move(value)});
  }
  return out;
}

std::size_t record_bytes(const FetchPartitionResponse& p) {
  return p.records ? p.records->size() : 0;
}

std::size_t record_count(const FetchPartitionResponse& p) {
  return p.records ? parse_record_batches(*p.records).size() : 0;
}

void fetch_completes_early(Client& consumer, Client& producer, const Pace& pace, Timeline& t,
                           Verdicts& v) {
  t.say(
      "\n[1] A fetch waits in the purgatory and completes early when produces bring enough bytes");
  t.restart();
  const std::string topic = pace.topic("early");
  const auto max_wait = static_cast<std::int32_t>(pace(milliseconds(5000)).count());
  producer.metadata(std::vector<std::string>{topic});
  FetchRequest fetch;
  fetch.max_wait_ms = max_wait;
  fetch.min_bytes = 1000;
  fetch.topics = {{topic, {{0, 0, 1 << 20}}}};
  const auto sent = Clock::now();
  consumer.send(fetch, kFetchVersion);
  t.at("consumer", fmt::format("Fetch {}-0 from offset 0, min_bytes=1000, max_wait_ms={}: parked",
                               topic, max_wait));
  std::this_thread::sleep_for(pace(milliseconds(300)));
  auto r1 = producer.produce_one(topic, 0, records(3, 120, "first"), 1);
  t.at("producer", fmt::format("Produce 3 records (acks=1) -> offset {}; about 450 bytes, less "
                               "than min_bytes: the fetch keeps waiting",
                               r1.base_offset));
  std::this_thread::sleep_for(pace(kSlowFollower + milliseconds(200)));
  auto r2 = producer.produce_one(topic, 0, records(6, 120, "second"), 1);
  t.at("producer", fmt::format("Produce 6 more records (acks=1) -> offset {}", r2.base_offset));
  const auto resp = consumer.receive<FetchResponse>(
      kFetchVersion, std::chrono::seconds(30) + pace(milliseconds(5000)));
  const double waited = ms_since(sent);
  const FetchPartitionResponse& p = resp.body.responses.at(0).partitions.at(0);
  t.at("consumer", fmt::format("Fetch answered after {:.0f} ms: {} records, {} bytes, high "
                               "watermark {}",
                               waited, record_count(p), record_bytes(p), p.high_watermark));
  v.check(p.error_code == Errc::none && record_count(p) == 9 && record_bytes(p) >= 1000,
          "the fetch returned all 9 records once min_bytes (1000) were below the high watermark");
  v.check(waited < 0.8 * max_wait,
          fmt::format("it completed early: {:.0f} ms, max_wait_ms was {}", waited, max_wait));
}

void fetch_expires_empty(Client& consumer, const Pace& pace, Timeline& t, Verdicts& v) {
  t.say("\n[2] A fetch with nothing to read expires after max_wait_ms and answers empty");
  t.restart();
  const std::string topic = pace.topic("quiet");
  const auto max_wait = static_cast<std::int32_t>(pace(milliseconds(1000)).count());
  consumer.metadata(std::vector<std::string>{topic});
  const auto sent = Clock::now();
  t.at("consumer", fmt::format("Fetch {}-0 from offset 0, min_bytes=1, max_wait_ms={}: parked",
                               topic, max_wait));
  const FetchPartitionResponse p = consumer.fetch_one(topic, 0, 0, max_wait, 1);
  const double waited = ms_since(sent);
  t.at("consumer", fmt::format("Fetch answered after {:.0f} ms: {} records (error {})", waited,
                               record_count(p), errc_name(p.error_code)));
  v.check(p.error_code == Errc::none && record_count(p) == 0, "the answer is empty, no error");
  v.check(waited >= max_wait - 10 && waited < max_wait + 3000,
          fmt::format("it waited max_wait_ms: {:.0f} ms (the timer never fires early)", waited));
}

void produce_completes_when_replicated(Client& producer, const Pace& pace, Timeline& t,
                                       Verdicts& v) {
  t.say(
      fmt::format("\n[3] An acks=-1 produce waits until every follower replicated it "
                  "(followers take {} ms and {} ms)",
                  kFastFollower.count(), kSlowFollower.count()));
  t.restart();
  const std::string topic = pace.topic("replicated");
  producer.metadata(std::vector<std::string>{topic});
  const auto sent = Clock::now();
  t.at("producer",
       fmt::format("Produce 2 records to {}-0, acks=-1, timeout_ms=3000 (sent)", topic));
  const ProducePartitionResponse r =
      producer.produce_one(topic, 0, records(2, 40, "all"), -1, 3000);
  const double waited = ms_since(sent);
  t.at("producer", fmt::format("Produce answered after {:.0f} ms: {} at offset {}", waited,
                               errc_name(r.error_code), r.base_offset));
  v.check(r.error_code == Errc::none, "acknowledged without error");
  v.check(waited >= static_cast<double>(kSlowFollower.count()) - 1 && waited < 2500,
          fmt::format("it completed when the slow follower caught up ({:.0f} ms), long before "
                      "its 3000 ms timeout",
                      waited));
}

void produce_times_out(Client& producer, Client& consumer, const Pace& pace, Timeline& t,
                       Verdicts& v) {
  t.say(
      fmt::format("\n[4] An acks=-1 produce times out when a follower is too slow "
                  "(timeout_ms=200, slow follower {} ms)",
                  kSlowFollower.count()));
  t.restart();
  const std::string topic = pace.topic("slow");
  producer.metadata(std::vector<std::string>{topic});
  const auto sent = Clock::now();
  t.at("producer", fmt::format("Produce 1 record to {}-0, acks=-1, timeout_ms=200 (sent)", topic));
  const ProducePartitionResponse r =
      producer.produce_one(topic, 0, records(1, 40, "late"), -1, 200);
  const double waited = ms_since(sent);
  t.at("producer",
       fmt::format("Produce answered after {:.0f} ms: {}", waited, errc_name(r.error_code)));
  v.check(r.error_code == Errc::request_timed_out,
          "answered REQUEST_TIMED_OUT (7): not every follower had the record in time");
  v.check(waited >= 199 && waited < 2000, fmt::format("after its timeout: {:.0f} ms", waited));
  std::this_thread::sleep_for(kSlowFollower);
  const FetchPartitionResponse p = consumer.fetch_one(topic, 0, 0, 2000, 1);
  t.at("consumer", fmt::format("Fetch {}-0 from offset 0: {} record(s), high watermark {}", topic,
                               record_count(p), p.high_watermark));
  v.check(record_count(p) == 1,
          "the timed-out record stayed in the log and became readable once replicated");
}

// Only in run_demo(): it needs a broker configured with `timing` (BrokerConfig::groups) and 4
// partitions, which the live view's broker (play_demo_scenarios) was not started with.
void consumer_group_rebalances(std::uint16_t port, const GroupScenarioTiming& timing, Timeline& t,
                               Verdicts& v) {
  t.say(fmt::format(
      "\n[5] Two consumers share a group: the join purgatory gathers them, the heartbeat "
      "purgatory expires one (initial delay {} ms, sessions {} ms)",
      timing.initial_rebalance_delay_ms, timing.session_timeout_ms));
  t.restart();
  run_group_scenario(
      port, timing,
      ScenarioOutput{[&t](std::string_view who, std::string_view what) { t.at(who, what); },
                     [&t](std::string_view text) { t.say(text); },
                     [&v](bool ok, std::string_view what) { v.check(ok, what); }});
}

// The four scenarios, with a pause between them at a slow pace (so a viewer can follow).
void play_all(const std::string& host, std::uint16_t port, const Pace& pace, Timeline& timeline,
              Verdicts& verdicts) {
  Client consumer("demo-consumer");
  Client producer("demo-producer");
  consumer.connect(host, port);
  producer.connect(host, port);
  const auto pause = [&] {
    std::this_thread::sleep_for(pace(milliseconds(1000)) - milliseconds(1000));
  };
  fetch_completes_early(consumer, producer, pace, timeline, verdicts);
  pause();
  fetch_expires_empty(consumer, pace, timeline, verdicts);
  pause();
  produce_completes_when_replicated(producer, pace, timeline, verdicts);
  pause();
  produce_times_out(producer, consumer, pace, timeline, verdicts);
}

// Only in run_demo(): it needs a broker of its own, one that loses produce answers.
void idempotent_retry(const BrokerConfig& demo_config, Timeline& t, Verdicts& v) {
  t.say(fmt::format(
      "\n[6] An idempotent producer's answer is lost; its retry is recognised, not appended "
      "twice (a second broker, started with --fault-drop-produce-response {})",
      kIdempotentScenarioLostAnswer));
  t.restart();
  BrokerConfig config = demo_config;
  config.partitions = 1;
  config.metrics_host.clear();
  config.fault_drop_produce_response_every = kIdempotentScenarioLostAnswer;
  BrokerRunner broker(config);
  run_idempotent_scenario(
      broker.port(), [&broker] { return broker.metrics().idempotence; },
      ScenarioOutput{[&t](std::string_view who, std::string_view what) { t.at(who, what); },
                     [&t](std::string_view text) { t.say(text); },
                     [&v](bool ok, std::string_view what) { v.check(ok, what); }});
  broker.stop();
}

void print_metrics(const BrokerMetrics& m, Timeline& t) {
  t.say("\n[7] Purgatory metrics");
  for (const PurgatoryMetrics* p : {&m.fetch, &m.produce, &m.join, &m.heartbeat}) {
    const auto ms = [](Nanos n) { return std::chrono::duration<double, std::milli>(n).count(); };
    t.say(
        fmt::format("  {:<8} waiting now {}, completed {}, expired {}; time in purgatory over "
                    "{} ops: p50 {:.0f} ms, p99 {:.0f} ms, max {:.0f} ms",
                    p->name, p->delayed, p->completed_total, p->expired_total, p->waited.count,
                    ms(p->waited.p50), ms(p->waited.p99), ms(p->waited.max)));
  }
}

void print_explore(const std::string& program, Timeline& t) {
  t.say(fmt::format(R"(
Explore further with kcat (Debian package kcat), one terminal each:
  broker:    {0} --verbose
  consumer:  kcat -C -b 127.0.0.1:9092 -t demo -X fetch.wait.max.ms=5000 -X fetch.min.bytes=1000
             (a long poll: each fetch waits in the purgatory up to 5 s for 1000 bytes)
  producer:  kcat -P -b 127.0.0.1:9092 -t demo        (type lines; Ctrl-D sends them)
  group:     restart the broker with --partitions 4, then in two more terminals
             kcat -b 127.0.0.1:9092 -G g1 demo
             (each consumer gets 2 partitions; stop one, and after the rebalance the other has 4)
  slow follower: restart the broker with --replication-delay-ms 50,1000, then
             echo hi | kcat -P -b 127.0.0.1:9092 -t demo -X acks=all -X request.timeout.ms=200 -X retries=0
             fails with "Request timed out": the produce waited 200 ms for a 1000 ms follower.
  lost answers: restart the broker with --fault-drop-produce-response 3, then
             seq 100 | kcat -E -P -b 127.0.0.1:9092 -t demo -X enable.idempotence=true -X batch.num.messages=10
             every 3rd answer is lost and retried; the log holds each line once.
  The broker's --verbose log shows each request's outcome and how long it waited.)",
                    program));
}

}  // namespace

int run_demo(const DemoOptions& options, std::FILE* out) {
  Timeline timeline(out);
  BrokerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.replication_delays = {kFastFollower, kSlowFollower};
  config.partitions = 4;  // the group scenario splits them; the others use partition 0
  const GroupScenarioTiming group_timing;
  config.groups.initial_rebalance_delay =
      std::chrono::milliseconds(group_timing.initial_rebalance_delay_ms);
  config.groups.min_session_timeout = std::chrono::milliseconds(group_timing.session_timeout_ms);
  config.verbose = options.verbose;
  config.metrics_host = options.metrics_host;
  config.metrics_port = options.metrics_port;
  config.on_event = [&timeline](std::string_view e) { timeline.at("broker", e); };
  config.log_sink = [&timeline](std::string_view line) { timeline.at("log", line); };
  try {
    BrokerRunner broker(config);
    timeline.say(
        fmt::format("purgatory demo: an in-memory Kafka broker on 127.0.0.1:{} with 2 "
                    "simulated followers (replicating after {} ms and {} ms)",
                    broker.port(), kFastFollower.count(), kSlowFollower.count()));
    if (broker.metrics_port() != 0) {
      timeline.say(fmt::format("metrics: curl -s http://{}:{}/metrics", options.metrics_host,
                               broker.metrics_port()));
    }
    Verdicts verdicts(timeline);
    play_all("127.0.0.1", broker.port(), Pace{}, timeline, verdicts);
    consumer_group_rebalances(broker.port(), group_timing, timeline, verdicts);
    idempotent_retry(config, timeline, verdicts);
    print_metrics(broker.metrics(), timeline);
    broker.stop();
    print_explore(options.program, timeline);
    timeline.say(verdicts.failed() == 0 ? "\nEvery scenario behaved as expected."
                                        : fmt::format("\n{} check(s) FAILED.", verdicts.failed()));
    return verdicts.failed() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    timeline.say(fmt::format("demo failed: {}", e.what()));
    return 1;
  }
}

int play_demo_scenarios(const std::string& host, std::uint16_t port, double pace,
                        const std::string& topic_suffix, std::FILE* out) {
  Timeline timeline(out);
  Verdicts verdicts(timeline);
  try {
    play_all(host, port, Pace{std::max(pace, 1.0), topic_suffix}, timeline, verdicts);
  } catch (const std::exception& e) {
    timeline.say(fmt::format("demo stopped: {}", e.what()));
    return 1;
  }
  timeline.say(verdicts.failed() == 0 ? "\nEvery scenario behaved as expected."
                                      : fmt::format("\n{} check(s) FAILED.", verdicts.failed()));
  return verdicts.failed() == 0 ? 0 : 1;
}

}  // namespace purgatory::broker
