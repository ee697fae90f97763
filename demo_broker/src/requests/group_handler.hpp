// GroupHandler: the consumer-group apis between the wire and the GroupCoordinator. Each handle()
// takes a decoded request and its response slot, calls the coordinator, and fills the slot
// through its Responder with the encoded answer and a log-line outcome. A JoinGroup or SyncGroup
// that has to wait for the rest of its group leaves its slot open: the coordinator's callback
// fills it when the join phase ends or the leader's assignment arrives (if the client has gone by
// then, its Responder drops the answer). So, as in Kafka, the requests a client pipelines behind
// a parked JoinGroup on the same connection are answered after it.
#pragma once

#include <functional>
#include <string_view>
#include <type_traits>

#include "group/group_coordinator.hpp"
#include "protocol/codec.hpp"
#include "requests/logger.hpp"
#include "requests/responder.hpp"

namespace purgatory::broker {

template <class T>
inline constexpr bool is_group_request_v =
    std::is_same_v<T, FindCoordinatorRequest> || std::is_same_v<T, JoinGroupRequest> ||
    std::is_same_v<T, SyncGroupRequest> || std::is_same_v<T, HeartbeatRequest> ||
    std::is_same_v<T, LeaveGroupRequest> || std::is_same_v<T, OffsetCommitRequest> ||
    std::is_same_v<T, OffsetFetchRequest> || std::is_same_v<T, ListGroupsRequest> ||
    std::is_same_v<T, DescribeGroupsRequest>;

// Call only from the broker's io thread. `header` is the request's (JoinGroup records the
// client_id).
class GroupHandler {
 public:
  // `self` tells FindCoordinator where this broker is (known once it listens). `coordinator` and
  // `logger` must outlive the handler.
  GroupHandler(GroupCoordinator& coordinator, std::function<FindCoordinatorResponse()> self,
               const Logger& logger)
      : coordinator_(coordinator), self_(std::move(self)), logger_(logger) {}

  void handle(const ResponseSlot& slot, const RequestHeader& header,
              const FindCoordinatorRequest& req);
  void handle(const ResponseSlot& slot, const RequestHeader& header, const JoinGroupRequest& req);
  void handle(const ResponseSlot& slot, const RequestHeader& header, const SyncGroupRequest& req);
  void handle(const ResponseSlot& slot, const RequestHeader& header, const HeartbeatRequest& req);
  void handle(const ResponseSlot& slot, const RequestHeader& header, const LeaveGroupRequest& req);
  void handle(const ResponseSlot& slot, const RequestHeader& header,
              const OffsetCommitRequest& req);
  void handle(const ResponseSlot& slot, const RequestHeader& header, const OffsetFetchRequest& req);
  void handle(const ResponseSlot& slot, const RequestHeader& header, const ListGroupsRequest& req);
  void handle(const ResponseSlot& slot, const RequestHeader& header,
              const DescribeGroupsRequest& req);

 private:
  GroupCoordinator& coordinator_;
  std::function<FindCoordinatorResponse()> self_;
  const Logger& logger_;
};

}  // namespace purgatory::broker
