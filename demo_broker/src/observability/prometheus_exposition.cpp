#include "observability/prometheus_exposition.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace purgatory::broker {

namespace {

class Exposition {
 public:
  // Starts a family: its HELP and TYPE lines.
  void family(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                   type);
  }
  void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
    fmt::format_to(std::back_inserter(out_), "{}{}{}{} {}\n", name, labels.empty() ? "" : "{",
                   labels, labels.empty() ? "" : "}", value);
  }
  void sample(std::string_view name, std::string_view labels, double value) {
    fmt::format_to(std::back_inserter(out_), "{}{}{}{} {}\n", name, labels.empty() ? "" : "{",
                   labels, labels.empty() ? "" : "}", value);
  }
  // A family of one sample with no labels.
  void single(std::string_view name, std::string_view type, std::string_view help,
              std::uint64_t value) {
    family(name, type, help);
    sample(name, "", value);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Purgatory names are ours ("fetch", "produce", "join", "heartbeat"), but escape as the format
// requires anyway.
std::string label_value(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

struct Named {
  std::string label;  // purgatory="..."
  const PurgatoryMetrics* metrics;
};

// Upper bounds of the wait histogram, in seconds (+Inf implicit): from a sub-millisecond fetch
// answered early to Kafka's 30 s default request.timeout.ms.
constexpr double kWaitBoundsSeconds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                         0.25,   0.5,   1,      2.5,   5,    10,    30};

using Purgatories = std::array<Named, 4>;

// The gauges and outcome counters of each purgatory, labelled by its name.
void purgatory_families(Exposition& e, const Purgatories& purgatories) {
  const auto per_purgatory = [&](std::string_view name, std::string_view type,
                                 std::string_view help, auto value_of) {
    e.family(name, type, help);
    for (const Named& p : purgatories)
      e.sample(name, p.label, static_cast<std::uint64_t>(value_of(*p.metrics)));
  };
  per_purgatory("purgatory_watched_keys", "gauge",
                "(operation, key) pairs watched now; an operation waiting on n partitions counts "
                "n (Kafka's PurgatorySize).",
                [](const PurgatoryMetrics& p) { return p.watched; });
  per_purgatory("purgatory_delayed_operations", "gauge",
                "Operations waiting in the purgatory now (Kafka's NumDelayedOperations).",
                [](const PurgatoryMetrics& p) { return p.delayed; });
  per_purgatory("purgatory_operations_completed_total", "counter",
                "Operations completed before their timeout (condition met or forced).",
                [](const PurgatoryMetrics& p) { return p.completed_total; });
  per_purgatory("purgatory_operations_expired_total", "counter",
                "Operations whose timeout passed first.",
                [](const PurgatoryMetrics& p) { return p.expired_total; });
  per_purgatory("purgatory_operations_shut_down_total", "counter",
                "Operations completed by the purgatory's shutdown.",
                [](const PurgatoryMetrics& p) { return p.shut_down_total; });
  per_purgatory("purgatory_operations_cancelled_total", "counter",
                "Operations withdrawn without an outcome (cancel_for_key).",
                [](const PurgatoryMetrics& p) { return p.cancelled_total; });
}

// Each purgatory's waiting times as one histogram.
void wait_histograms(Exposition& e, const Purgatories& purgatories) {
  constexpr std::string_view kWait = "purgatory_wait_duration_seconds";
  e.family(kWait, "histogram",
           "Time operations spent watched in the purgatory, from the watch to their outcome.");
  for (const Named& p : purgatories) {
    // The purgatory's own log-linear histogram, folded into these bounds: cumulative and
    // monotone by construction, the +Inf bucket equal to _count.
    const LatencyHistogram::Snapshot& waited = p.metrics->waited_histogram;
    for (double bound : kWaitBoundsSeconds) {
      const auto ns = std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(bound));
      e.sample(fmt::format("{}_bucket", kWait), fmt::format("{},le=\"{}\"", p.label, bound),
               waited.count_at_most(ns));
    }
    const std::uint64_t count = waited.count();
    e.sample(fmt::format("{}_bucket", kWait), fmt::format("{},le=\"+Inf\"", p.label), count);
    e.sample(fmt::format("{}_sum", kWait), p.label, static_cast<double>(waited.sum_ns) / 1e9);
    e.sample(fmt::format("{}_count", kWait), p.label, count);
  }
}

void timer_family(Exposition& e, const std::vector<std::size_t>& pending_per_level) {
  e.family("purgatory_timer_pending_tasks", "gauge",
           "Tasks scheduled in the broker's timer (every purgatory's timeouts and the simulated "
           "followers' catch-ups), per timing-wheel level, finest first.");
  for (std::size_t level = 0; level < pending_per_level.size(); ++level) {
    e.sample("purgatory_timer_pending_tasks", fmt::format("level=\"{}\"", level),
             static_cast<std::uint64_t>(pending_per_level[level]));
  }
}

void connection_families(Exposition& e, const BrokerMetrics& m) {
  e.single("demo_broker_connections_accepted_total", "counter", "Kafka connections accepted.",
           m.connections_accepted);
  e.single("demo_broker_connections_open", "gauge", "Kafka connections open now.",
           m.connections_open);
  e.single("demo_broker_requests_total", "counter", "Kafka request frames received.", m.requests);
  e.single("demo_broker_malformed_requests_total", "counter",
           "Connections closed for a request that could not be parsed.", m.malformed_requests);
  e.single("demo_broker_abandoned_operations_total", "counter",
           "Parked operations whose client disconnected before the answer.",
           m.abandoned_operations);
}

void group_families(Exposition& e, const GroupCoordinatorStats& g) {
  e.single("demo_broker_consumer_groups", "gauge", "Consumer groups the coordinator knows now.",
           g.groups);
  e.single("demo_broker_group_members", "gauge", "Members of all consumer groups now.", g.members);
  e.single("demo_broker_group_rebalances_total", "counter",
           "Join phases begun (a group entering PreparingRebalance).", g.rebalances);
  e.single("demo_broker_group_generations_total", "counter",
           "Join phases that ended with members: new generations.", g.generations);
  e.single("demo_broker_group_members_evicted_total", "counter",
           "Members evicted for not rejoining before their group's join phase ended.",
           g.members_evicted);
  e.single("demo_broker_group_sessions_expired_total", "counter",
           "Members removed by the heartbeat purgatory (session or new-member join timeout).",
           g.sessions_expired);
  e.single("demo_broker_group_members_left_total", "counter", "Members that left (LeaveGroup).",
           g.members_left);
  e.single("demo_broker_group_offsets_committed_total", "counter",
           "Partition offsets committed (OffsetCommit).", g.offsets_committed);
}

void idempotence_families(Exposition& e, const IdempotenceStats& i) {
  e.single("demo_broker_producer_ids_issued_total", "counter",
           "Producer ids handed to idempotent producers (InitProducerId).", i.producer_ids_issued);
  e.single("demo_broker_producer_states", "gauge",
           "(partition, idempotent producer) states remembered now to recognise retries.",
           i.producer_states);
  e.single("demo_broker_producer_states_forgotten_total", "counter",
           "Producer states dropped to make room (--max-producers-per-partition).",
           i.producer_states_forgotten);
  e.single("demo_broker_duplicate_batches_total", "counter",
           "Retried batches of idempotent producers recognised and not appended again (answered "
           "with the original offset, or DUPLICATE_SEQUENCE_NUMBER when older than the 5 "
           "remembered).",
           i.duplicate_batches);
  constexpr std::string_view kRefused = "demo_broker_idempotent_batches_refused_total";
  e.family(kRefused, "counter",
           "Batches of idempotent producers refused, by Kafka error: a sequence gap, a stale "
           "epoch, a producer with no state.");
  e.sample(kRefused, "error=\"OUT_OF_ORDER_SEQUENCE_NUMBER\"", i.out_of_order_batches);
  e.sample(kRefused, "error=\"INVALID_PRODUCER_EPOCH\"", i.stale_epoch_batches);
  e.sample(kRefused, "error=\"UNKNOWN_PRODUCER_ID\"", i.unknown_producer_batches);
  e.single("demo_broker_transactions_refused_total", "counter",
           "InitProducerId or Produce requests of a transactional producer, refused "
           "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED).",
           i.transactional_refused);
}

}  // namespace

std::string to_prometheus_text(const BrokerMetrics& m) {
  const auto label = [](const PurgatoryMetrics& p) {
    return fmt::format("purgatory=\"{}\"", label_value(p.name));
  };
  const Purgatories purgatories{Named{label(m.fetch), &m.fetch},
                                Named{label(m.produce), &m.produce}, Named{label(m.join), &m.join},
                                Named{label(m.heartbeat), &m.heartbeat}};
  Exposition e;
  purgatory_families(e, purgatories);
  wait_histograms(e, purgatories);
  timer_family(e, m.timer_pending_per_level);
  connection_families(e, m);
  group_families(e, m.groups);
  idempotence_families(e, m.idempotence);
  return e.take();
}

}  // namespace purgatory::broker
