// GroupConfig: the group coordinator's settings, Kafka's group.* broker configs.
#pragma once

#include <chrono>
#include <cstddef>

namespace purgatory::broker {

// A plain value type, thread-compatible.
struct GroupConfig {
  // A JoinGroup whose session_timeout_ms lies outside [min, max] is answered
  // INVALID_SESSION_TIMEOUT (group.min/max.session.timeout.ms).
  std::chrono::milliseconds min_session_timeout{6000};
  std::chrono::milliseconds max_session_timeout{30 * 60 * 1000};
  // How long an empty group's first join phase waits for more members before it completes, and
  // waits again each time one arrives (up to the rebalance timeout): so consumers started together
  // get one rebalance, not one each (group.initial.rebalance.delay.ms).
  std::chrono::milliseconds initial_rebalance_delay{3000};
  // How long a member that has joined but never completed a join phase may wait in one before it
  // is dropped (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs): a client that gave up on its
  // JoinGroup and retried must not be waited for until the rebalance timeout.
  std::chrono::milliseconds new_member_join_timeout{5 * 60 * 1000};
  // Longer commit metadata is refused with OFFSET_METADATA_TOO_LARGE (offset.metadata.max.bytes).
  std::size_t max_offset_metadata_bytes = 4096;
};

}  // namespace purgatory::broker
