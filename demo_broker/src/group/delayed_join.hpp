// DelayedJoin and InitialDelayedJoin: Kafka's join-phase operations, one per rebalancing group in
// the join purgatory, watched on the group id.
//
// DelayedJoin completes when every known member has sent its JoinGroup again (each JoinGroup and
// each member removal checks the group's key), or expires at the group's rebalance timeout (the
// longest of its members'). Either way GroupCoordinator::on_complete_join() ends the join phase:
// it evicts the members that did not rejoin, starts the next generation and answers the parked
// JoinGroups.
//
// InitialDelayedJoin is an empty group's first join phase: it never completes early. When its
// delay passes it ends the join phase, unless a new member came meanwhile and rebalance time is
// left: then it waits another delay (at most the configured one, within what is left), so
// consumers started together land in one generation instead of rebalancing once per arrival.
//
// Call only from the coordinator's thread (the purgatory's timer expires them there too).
// Outcome::shut_down does nothing: the coordinator is going away.
#pragma once

#include <cstdint>
#include <memory>

#include "group_metadata.hpp"
#include "purgatory/delayed_operation.hpp"

namespace purgatory::broker {

class GroupCoordinator;

class DelayedJoin final : public DelayedOperation {
 public:
  DelayedJoin(GroupCoordinator& coordinator, std::shared_ptr<GroupMetadata> group,
              std::int32_t rebalance_timeout_ms);

 protected:
  bool try_complete() override;
  void on_complete() override;

 private:
  GroupCoordinator& coordinator_;
  const std::shared_ptr<GroupMetadata> group_;
  const std::int32_t rebalance_timeout_ms_;
};

class InitialDelayedJoin final : public DelayedOperation {
 public:
  // Waits `delay_ms`; `remaining_ms` of the rebalance timeout are left after it.
  InitialDelayedJoin(GroupCoordinator& coordinator, std::shared_ptr<GroupMetadata> group,
                     std::int32_t delay_ms, std::int32_t remaining_ms);

 protected:
  bool try_complete() override { return false; }
  void on_complete() override;

 private:
  GroupCoordinator& coordinator_;
  const std::shared_ptr<GroupMetadata> group_;
  const std::int32_t delay_ms_;
  const std::int32_t remaining_ms_;
};

}  // namespace purgatory::broker
