// DelayedHeartbeat: Kafka's per-member session operation, in the heartbeat purgatory, watched on
// (group, member) with the member's session timeout.
//
// Every sign of life (a heartbeat, a commit, a join or sync answered) completes the member's
// operation and watches a new one: so at most one waits per member, and its expiry means the
// session really lapsed. A member waiting in a join or sync phase counts as alive (its operation
// completes at once), except a new member, whose operation runs with the new-member join timeout.
// On expiry GroupCoordinator::on_expire_heartbeat() removes the member, and the group
// rebalances.
//
// A pending operation (is_pending) covers a member id handed out with MEMBER_ID_REQUIRED: it
// completes when that id joins, and on expiry the id is forgotten.
//
// Call only from the coordinator's thread (the purgatory's timer expires them there too).
// Outcome::shut_down does nothing.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "group_metadata.hpp"
#include "purgatory/delayed_operation.hpp"

namespace purgatory::broker {

class GroupCoordinator;

class DelayedHeartbeat final : public DelayedOperation {
 public:
  DelayedHeartbeat(GroupCoordinator& coordinator, std::shared_ptr<GroupMetadata> group,
                   std::string member_id, bool is_pending, std::chrono::milliseconds timeout);

 protected:
  bool try_complete() override;
  void on_complete() override {}
  void on_expiration() override;

 private:
  GroupCoordinator& coordinator_;
  const std::shared_ptr<GroupMetadata> group_;
  const std::string member_id_;
  const bool is_pending_;
};

}  // namespace purgatory::broker
