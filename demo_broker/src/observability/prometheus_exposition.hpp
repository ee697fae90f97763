// The broker's metrics in Prometheus's text exposition format (version 0.0.4): one `# HELP` and
// one `# TYPE` line per family, then its samples. Families, all with units or _total in the name:
//   purgatory_watched_keys{purgatory}               gauge     (operation, key) pairs watched now
//   purgatory_delayed_operations{purgatory}         gauge     operations waiting now
//   purgatory_operations_{completed,expired,shut_down,cancelled}_total{purgatory}   counters
//   purgatory_wait_duration_seconds{purgatory}      histogram watch -> outcome
//   purgatory_timer_pending_tasks{level}            gauge     tasks per timing-wheel level
//   demo_broker_{connections_accepted_total, connections_open, requests_total,
//                malformed_requests_total, abandoned_operations_total}
//   demo_broker_consumer_groups, demo_broker_group_*       the consumer-group coordinator
//   demo_broker_{producer_ids_issued_total, producer_states, producer_states_forgotten_total,
//                duplicate_batches_total, transactions_refused_total}   idempotent producers
//   demo_broker_idempotent_batches_refused_total{error}   counter   by Kafka error code name
#pragma once

#include <string>

#include "observability/broker_metrics.hpp"

namespace purgatory::broker {

// Pure: formats the snapshot. Thread-compatible.
[[nodiscard]] std::string to_prometheus_text(const BrokerMetrics& metrics);

}  // namespace purgatory::broker
