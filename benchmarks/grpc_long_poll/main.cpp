// grpc_long_poll_bench: the gRPC long-poll served two ways in one run, the purgatory
// (examples/grpc/grpc_long_poll_server) against one grpc::Alarm per parked call and a map of
// waiting calls per key (grpc_long_poll_alarm_server, alarm_waits.hpp). Both are the same
// Mailbox service (mailbox_service.hpp) and differ only in how a call waits.
//
// Each run starts each server as a process of its own, twice, the two alternating (run 1:
// purgatory then alarm, run 2: alarm then purgatory, ...), and measures:
//   - CPU per request at a steady rate: --rate Waits a second for --seconds (after a second of
//     warm-up), issued in batches every 5 ms over 4 channels. Half are on 20 keys that get a
//     Publish every 50 ms each (they complete, 5 per Publish on average), half on 1,000 keys
//     nobody publishes, with a 100 ms timeout (they expire). The server's user+system CPU time
//     over the window (/proc/PID/stat) divided by the Waits issued in it; the Publishes' cost is
//     in it too, the same for both.
//   - Bytes per parked call: --parked Waits (timeout 60 s) parked on 1,000 keys over 16 channels;
//     the server's resident set once Stats says they all wait, minus its resident set idle
//     (connected, after a warm-up of 1,000 Waits), over --parked. Then one Publish per key
//     answers them all.
// Every answer is checked (COMPLETED with a value of its own key, or EXPIRED, as the load
// expects) and each server must exit 0 on SIGTERM: a run with a wrong or missing answer fails
// the benchmark (exit status 1). It prints each run, then the medians and their ratio.
//
//   grpc_long_poll_bench [--runs 3] [--rate 4000] [--seconds 5] [--parked 100000]
//   grpc_long_poll_bench --smoke     a few hundred requests, one run: checks the answers only

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "load_client.hpp"
#include "server_process.hpp"

namespace {

using grpc_bench::LoadClient;
using grpc_bench::ServerProcess;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Config {
  int runs = 3;
  int rate = 4000;     // Waits per second
  double seconds = 5;  // measured, after the warm-up
  double warmup_seconds = 1;
  int parked = 100'000;
  std::string purgatory_server = PURGATORY_GRPC_SERVER;
  std::string alarm_server = PURGATORY_GRPC_ALARM_SERVER;
};

constexpr int kHotKeys = 20;  // published every kPublishEvery each
constexpr auto kPublishEvery = 50ms;
constexpr int kQuietKeys = 1000;  // never published: their Waits expire
constexpr std::uint32_t kQuietTimeoutMs = 100;
constexpr std::uint32_t kHotTimeoutMs = 10'000;  // far beyond the next Publish on the key
constexpr int kParkedKeys = 1000;
constexpr auto kTick = 5ms;

struct Figures {
  double cpu_us_per_request = -1;
  double switches_per_request = -1;  // the server's context switches
  double bytes_per_parked = -1;
};

// Whether every Wait got the answer the load expects, and the server stopped cleanly.
bool verify(const char* phase, const LoadClient& client, bool drained, ServerProcess& server) {
  const auto& t = client.tally();
  std::string last;
  const int status = server.stop(&last);
  const bool ok = drained && t.answered == t.issued && t.wrong == 0 && t.publishes_failed == 0 &&
                  t.completed + t.expired == t.issued && status == 0;
  if (!ok) {
    fmt::print(stderr,
               "  {}: FAILED: issued {}, answered {}, completed {}, expired {}, wrong {}, "
               "publishes failed {}, drained {}, exit status {} ({})\n",
               phase, t.issued.load(), t.answered.load(), t.completed.load(), t.expired.load(),
               t.wrong.load(), t.publishes_failed.load(), drained, status, last);
  }
  return ok;
}

// CPU and context switches per Wait at a steady rate; false on failure.
bool steady_rate(const Config& config, const std::string& binary, Figures& figures) {
  ServerProcess server(binary);
  LoadClient client(server.port(), 4);
  const double per_tick = config.rate * std::chrono::duration<double>(kTick).count();
  const auto start = Clock::now();
  const auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(config.warmup_seconds));
  const auto measure_to = measure_from + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(config.seconds));
  double owed = 0;  // Waits due but not yet sent (the rate is rarely a whole number per tick)
  std::uint64_t sent = 0;
  std::uint64_t ticks = 0;
  double cpu_from = -1;
  long switches_from = 0;
  std::uint64_t issued_from = 0;
  auto next = start;
  for (auto now = start; now < measure_to; now = Clock::now()) {
    if (cpu_from < 0 && now >= measure_from) {
      cpu_from = server.cpu_seconds();
      switches_from = server.context_switches();
      issued_from = client.tally().issued;
    }
    for (owed += per_tick; owed >= 1; owed -= 1, ++sent) {
      if (sent % 2 == 0) {
        client.wait(fmt::format("hot-{}", sent / 2 % kHotKeys), kHotTimeoutMs, true);
      } else {
        client.wait(fmt::format("quiet-{}", sent / 2 % kQuietKeys), kQuietTimeoutMs, false);
      }
    }
    // Each hot key is published once per kPublishEvery: kTick / kPublishEvery of them a tick.
    const int per_publish_round = static_cast<int>(kPublishEvery / kTick);
    for (int k = static_cast<int>(ticks % per_publish_round); k < kHotKeys;
         k += per_publish_round) {
      client.publish(fmt::format("hot-{}", k));
    }
    ++ticks;
    next += kTick;
    std::this_thread::sleep_until(next);
  }
  const double cpu = server.cpu_seconds() - cpu_from;
  const long switches = server.context_switches() - switches_from;
  const auto issued = static_cast<double>(client.tally().issued - issued_from);
  // The hot Waits still parked need their Publish: keep publishing until every Wait is answered.
  bool drained = false;
  for (const auto give_up = Clock::now() + 20s; !drained && Clock::now() < give_up;) {
    for (int k = 0; k < kHotKeys; ++k)
      client.publish(fmt::format("hot-{}", k));
    drained = client.drain(kPublishEvery);
  }
  if (!verify("steady rate", client, drained, server)) return false;
  figures.cpu_us_per_request = cpu * 1e6 / issued;
  figures.switches_per_request = static_cast<double>(switches) / issued;
  return true;
}

// Resident bytes per parked Wait; false on failure.
bool parked_bytes(const Config& config, const std::string& binary, Figures& figures) {
  ServerProcess server(binary);
  LoadClient client(server.port(), 16);
  for (int i = 0; i < std::min(config.parked, 1000); ++i) {
    client.wait(fmt::format("warm-{}", i % 10), 0, false);
  }
  bool drained = client.drain(30s);
  std::this_thread::sleep_for(300ms);
  const long idle = server.rss_bytes();
  for (int i = 0; i < config.parked; ++i) {
    client.wait(fmt::format("parked-{}", i % kParkedKeys), 60'000, true);
  }
  bool all_parked = false;
  for (const auto give_up = Clock::now() + 120s; !all_parked && Clock::now() < give_up;) {
    std::this_thread::sleep_for(50ms);
    const auto stats = client.stats();
    all_parked = stats && stats->waiting() == static_cast<std::uint64_t>(config.parked);
  }
  std::this_thread::sleep_for(300ms);
  const long parked = server.rss_bytes();
  for (int k = 0; k < kParkedKeys; ++k)
    client.publish(fmt::format("parked-{}", k));
  drained = client.drain(60s) && drained;
  if (!all_parked) fmt::print(stderr, "  parked: Stats never said {} waiting\n", config.parked);
  if (!verify("parked", client, drained, server) || !all_parked) return false;
  figures.bytes_per_parked = static_cast<double>(parked - idle) / config.parked;
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  bool smoke = false;
  CLI::App app{"gRPC long-poll: the purgatory against one grpc::Alarm per parked call"};
  app.add_option("--runs", config.runs, "runs of each implementation (median)")
      ->check(CLI::PositiveNumber);
  app.add_option("--rate", config.rate, "Waits per second in the steady-rate phase")
      ->check(CLI::Range(10, 100'000));
  app.add_option("--seconds", config.seconds, "measured seconds of the steady-rate phase")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--parked", config.parked, "Waits parked at once in the memory phase")
      ->check(CLI::Range(100, 1'000'000));
  app.add_option("--purgatory-server", config.purgatory_server, "grpc_long_poll_server binary");
  app.add_option("--alarm-server", config.alarm_server, "grpc_long_poll_alarm_server binary");
  app.add_flag("--smoke", smoke, "a few hundred requests, one run: check the answers only");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    config = {.runs = 1,
              .rate = 400,
              .seconds = 0.5,
              .warmup_seconds = 0.2,
              .parked = 500,
              .purgatory_server = config.purgatory_server,
              .alarm_server = config.alarm_server};
  }

  struct Implementation {
    const char* name;
    const std::string* binary;
    std::vector<Figures> runs;
  };
  std::vector<Implementation> impls = {{"purgatory", &config.purgatory_server, {}},
                                       {"grpc::Alarm", &config.alarm_server, {}}};
  fmt::print(
      "{} run(s): {} Waits/s for {} s (half completed by a Publish, half expired), then "
      "{} parked Waits\n",
      config.runs, config.rate, config.seconds, config.parked);
  bool ok = true;
  try {
    for (int run = 0; run < config.runs && ok; ++run) {
      for (int i = 0; i < 2 && ok; ++i) {
        Implementation& impl = impls[(run + i) % 2];  // alternating which goes first
        Figures f;
        ok = steady_rate(config, *impl.binary, f) && parked_bytes(config, *impl.binary, f);
        fmt::print(
            "run {} {:<12} CPU {:6.2f} us/request, {:5.2f} context switches/request, "
            "{:6.0f} bytes/parked call\n",
            run + 1, impl.name, f.cpu_us_per_request, f.switches_per_request, f.bytes_per_parked);
        std::fflush(stdout);
        impl.runs.push_back(f);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "grpc_long_poll_bench: {}\n", e.what());
    return 1;
  }
  if (!ok) {
    fmt::print(stderr, "grpc_long_poll_bench: a run got wrong or missing answers\n");
    return 1;
  }
  // The medians, and purgatory / grpc::Alarm.
  Figures m[2];
  for (int i = 0; i < 2; ++i) {
    std::vector<double> cpu, switches, bytes;
    for (const Figures& f : impls[i].runs) {
      cpu.push_back(f.cpu_us_per_request);
      switches.push_back(f.switches_per_request);
      bytes.push_back(f.bytes_per_parked);
    }
    m[i] = {median(cpu), median(switches), median(bytes)};
  }
  fmt::print("\nmedians of {} run(s)    | CPU us/request | switches/request | bytes/parked call\n",
             config.runs);
  for (int i = 0; i < 2; ++i) {
    fmt::print("{:<23} | {:14.2f} | {:16.2f} | {:17.0f}\n", impls[i].name, m[i].cpu_us_per_request,
               m[i].switches_per_request, m[i].bytes_per_parked);
  }
  fmt::print("purgatory / grpc::Alarm | {:14.2f} | {:16.2f} | {:17.3f}\n",
             m[0].cpu_us_per_request / m[1].cpu_us_per_request,
             m[0].switches_per_request / m[1].switches_per_request,
             m[0].bytes_per_parked / m[1].bytes_per_parked);
  fmt::print("grpc::Alarm - purgatory | {:14.2f} | {:16.2f} | {:17.0f}\n",
             m[1].cpu_us_per_request - m[0].cpu_us_per_request,
             m[1].switches_per_request - m[0].switches_per_request,
             m[1].bytes_per_parked - m[0].bytes_per_parked);
  fmt::print("every answer checked: all right\n");
  return 0;
}
