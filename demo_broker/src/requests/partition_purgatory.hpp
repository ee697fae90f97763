// The produce and fetch purgatories: operations watched on the topic-partitions they wait for, as
// Kafka's DelayedFetch and DelayedProduce are (TopicPartitionOperationKey). Each handler owns its
// own; a high-watermark move on a partition wakes only the operations watching it.
#pragma once

#include <memory>

#include "protocol/topic_partition.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/timer/system_timer.hpp"
#include "requests/logger.hpp"

namespace purgatory::broker {

using Purgatory = DelayedOperationPurgatory<TopicPartition, TopicPartitionHash>;

// How late a fetch's or produce's timeout may fire, as a fraction of it (PurgatoryOptions).
inline constexpr double kTimeoutSlack = 0.125;

// A purgatory named `name` (its metrics' label) on the broker's timer, with one shard (one thread
// touches it: more would only cost memory), its timeouts kTimeoutSlack late at most. An exception
// escaping an operation's callback (a bug) is logged through `logger`, which must outlive the
// purgatory, and the broker goes on.
[[nodiscard]] std::unique_ptr<Purgatory> make_partition_purgatory(
    const std::shared_ptr<SystemTimer>& timer, const char* name, const Logger& logger);

}  // namespace purgatory::broker
