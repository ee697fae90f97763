// The demo's idempotent-producer scenario: a producer gets a producer id (InitProducerId) and
// writes numbered batches; the broker appends the second, then loses its answer (the connection
// closes, as with --fault-drop-produce-response); the producer retries the same batch on a new
// connection and is answered with the offset of its first attempt, and the log holds every record
// once.
#pragma once

#include <cstdint>
#include <functional>

#include "group_scenario.hpp"
#include "observability/broker_metrics.hpp"

namespace purgatory::broker {

// The broker the scenario runs against loses every kIdempotentScenarioLostAnswer-th Produce
// answer (BrokerConfig::fault_drop_produce_response_every) and has no other producer.
inline constexpr std::uint32_t kIdempotentScenarioLostAnswer = 2;

// Runs against such a broker on 127.0.0.1:`port`, on the calling thread (its clients block);
// `stats` reads the broker's idempotence counters. Throws ClientError when the broker does not
// answer what it should; every other surprise is a failed check.
void run_idempotent_scenario(std::uint16_t port, const std::function<IdempotenceStats()>& stats,
                             const ScenarioOutput& out);

}  // namespace purgatory::broker
