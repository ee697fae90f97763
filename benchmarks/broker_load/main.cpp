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
// The files, one concern each: broker_process (the child process), connection (one response per
// request), load and load_consumer / load_producer (the traffic), ledger (exactly once, in
// order), load_stats (the figures), failures (what broke).

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "broker_process.hpp"
#include "failures.hpp"
#include "load.hpp"
#include "options.hpp"

namespace {

using broker_load::BrokerProcess;
using broker_load::Failures;
using broker_load::Load;
using broker_load::Options;

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
    load.run(
        [&](bool warm) {
          const long rss = broker.rss_kib();
          rss_max = std::max(rss_max, rss);
          if (warm) rss_warm = rss;
        },
        [&] { rss_end = broker.rss_kib(); });
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
