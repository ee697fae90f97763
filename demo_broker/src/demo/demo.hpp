// The scripted demo (`demo_broker --demo`): starts a broker in-process on a free loopback port
// and plays scenarios against it with the codec-based Client, printing a timeline of what the
// purgatories do: a fetch completing early when a produce brings enough bytes, a fetch expiring
// empty after max_wait_ms, an acks=-1 produce completing when the followers catch up and one
// timing out behind a slow follower, two consumers sharing a group until the heartbeat purgatory
// expires one, an idempotent producer whose lost answer is retried and recognised (on a second
// broker that loses produce answers), then the purgatory metrics and how to explore with kcat.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace purgatory::broker {

// A plain value, thread-compatible.
struct DemoOptions {
  bool verbose = false;                 // also print the broker's per-request log lines
  std::string program = "demo_broker";  // how to start the broker, in the kcat hints
  std::string metrics_host;             // also serve GET /metrics there (port 0: any); empty: no
  std::uint16_t metrics_port = 0;
};

// Followers of the demo's broker: the scenarios' checks rely on these replication delays.
inline constexpr std::chrono::milliseconds kDemoFollowerDelays[] = {std::chrono::milliseconds(100),
                                                                    std::chrono::milliseconds(400)};

// Plays the fetch and produce scenarios (not the consumer-group one, which needs the broker's
// group settings, nor the idempotent producer's, which needs a broker that loses answers) against a
// broker already listening on host:port whose two simulated followers replicate after
// kDemoFollowerDelays, `pace` (>= 1) times slower than the scripted timeline so that the live view
// can be watched, on topics named with `topic_suffix` ("early", "quiet", ... plus the suffix).
// Prints the timeline to `out`. Returns 0 when every check passed. Blocks for about 5 s times
// `pace`; call from a thread other than the broker's.
int play_demo_scenarios(const std::string& host, std::uint16_t port, double pace,
                        const std::string& topic_suffix, std::FILE* out);

// Runs every scenario (a few seconds in all). Returns 0 when each behaved as expected, 1
// otherwise. Prints to `out`. Call from one thread at a time.
int run_demo(const DemoOptions& options, std::FILE* out);

}  // namespace purgatory::broker
