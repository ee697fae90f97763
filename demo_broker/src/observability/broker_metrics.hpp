// BrokerMetrics: what the demo broker reports about itself (Broker::metrics()), kept apart from
// server/broker.hpp so that observability/ formats it without depending on the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "group/group_coordinator_stats.hpp"
#include "purgatory/purgatory_metrics.hpp"
#include "requests/idempotence_stats.hpp"

namespace purgatory::broker {

// What the broker reports about itself: a snapshot, each field read atomically. A plain value,
// thread-compatible.
struct BrokerMetrics {
  PurgatoryMetrics fetch;
  PurgatoryMetrics produce;
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_open = 0;
  std::uint64_t requests = 0;
  std::uint64_t malformed_requests = 0;              // connections closed for a bad frame
  std::uint64_t abandoned_operations = 0;            // parked when their client disconnected
  std::vector<std::size_t> timer_pending_per_level;  // the shared timer, finest level first
  PurgatoryMetrics join;                             // the group coordinator's join purgatory
  PurgatoryMetrics heartbeat;                        // and its heartbeat purgatory
  GroupCoordinatorStats groups;
  IdempotenceStats idempotence;
};

}  // namespace purgatory::broker
