#include "delayed_heartbeat.hpp"

#include <utility>

#include "group/group_coordinator.hpp"

namespace purgatory::broker {

DelayedHeartbeat::DelayedHeartbeat(GroupCoordinator& coordinator,
                                   std::shared_ptr<GroupMetadata> group, std::string member_id,
                                   bool is_pending, std::chrono::milliseconds timeout)
    : DelayedOperation(timeout),
      coordinator_(coordinator),
      group_(std::move(group)),
      member_id_(std::move(member_id)),
      is_pending_(is_pending) {}

bool DelayedHeartbeat::try_complete() {
  return coordinator_.can_complete_heartbeat(*group_, member_id_, is_pending_) && force_complete();
}

void DelayedHeartbeat::on_expiration() {
  coordinator_.on_expire_heartbeat(group_, member_id_, is_pending_, timeout());
}

}  // namespace purgatory::broker
