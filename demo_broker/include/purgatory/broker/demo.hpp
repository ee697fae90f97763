// The scripted demo (`demo_broker --demo`): starts a broker in-process on a free loopback port
// and plays scenarios against it with the codec-based Client, printing a timeline of what the
// purgatories do: a fetch completing early when a produce brings enough bytes, a fetch expiring
// empty after max_wait_ms, an acks=-1 produce completing when the followers catch up and one
// timing out behind a slow follower, two consumers sharing a group until the heartbeat purgatory
// expires one, then the purgatory metrics and how to explore with kcat.
#pragma once

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

// Runs every scenario (a few seconds in all). Returns 0 when each behaved as expected, 1
// otherwise. Prints to `out`. Call from one thread at a time.
int run_demo(const DemoOptions& options, std::FILE* out);

}  // namespace purgatory::broker
