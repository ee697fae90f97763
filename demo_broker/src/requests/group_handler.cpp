#include "requests/group_handler.hpp"

#include <string>

#include <fmt/format.h>

#include "protocol/consumer_protocol.hpp"

namespace purgatory::broker {

namespace {

// Kafka's client_host: "/" and the address, without the port.
std::string client_host(const Responder& responder) {
  const std::string& peer = responder.peer();
  const auto colon = peer.rfind(':');
  return "/" + (colon == std::string::npos ? peer : peer.substr(0, colon));
}

// "orders-0,orders-1" when the bytes hold a consumer assignment, else their size.
std::string describe_assignment_bytes(const Bytes& assignment) {
  if (assignment.empty()) return "nothing";
  try {
    return describe_assignment(decode_assignment(assignment));
  } catch (const DecodeError&) {
    return fmt::format("{} bytes", assignment.size());
  }
}

template <class Resp>
void respond(const ResponseSlot& slot, const Resp& resp, std::string_view outcome) {
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id), outcome);
}

}  // namespace

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& header,
                          const FindCoordinatorRequest& req) {
  FindCoordinatorResponse resp = self_();
  std::string outcome =
      fmt::format("this broker (node {}) coordinates '{}'", resp.node_id, req.key);
  if (req.key_type == kCoordinatorKeyTransaction) {
    // Transactions are not spoken here. Kafka answers this code when a producer may not use its
    // transactional id; every client takes it as fatal, so a transactional producer stops at once
    // with it instead of looking for a coordinator forever (InitProducerId refuses it the same).
    resp = FindCoordinatorResponse{};
    resp.error_code = Errc::transactional_id_authorization_failed;
    resp.error_message = fmt::format(
        "transactional id '{}': demo_broker does not speak transactions (idempotent producers, "
        "without a transactional id, are served)",
        req.key);
    outcome = fmt::format("{}: {}", errc_name(resp.error_code), *resp.error_message);
    logger_.log(fmt::format("conn {} {} [{}]: FindCoordinator for a transaction refused, {}",
                            slot.conn->id(), slot.conn->peer(), header.client_id.value_or(""),
                            outcome));
  } else if (req.key_type != kCoordinatorKeyGroup) {
    resp = FindCoordinatorResponse{};
    resp.error_code = Errc::invalid_request;
    resp.error_message = fmt::format("key_type {}: this broker coordinates groups only (0)",
                                     static_cast<int>(req.key_type));
    outcome = *resp.error_message;
  }
  respond(slot, resp, outcome);
}

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& header,
                          const JoinGroupRequest& req) {
  JoinContext ctx;
  ctx.require_known_member_id = slot.version >= 4;
  ctx.client_id = header.client_id.value_or("");
  ctx.client_host = client_host(*slot.conn);
  coordinator_.join_group(req, ctx, [slot](const JoinGroupResponse& resp, std::string_view how) {
    std::string outcome;
    if (resp.error_code != Errc::none) {
      outcome = std::string(how);
    } else if (resp.member_id == resp.leader) {
      outcome = fmt::format("generation {}, leader of {} member(s), protocol {} ({})",
                            resp.generation_id, resp.members.size(), resp.protocol_name, how);
    } else {
      outcome = fmt::format("generation {}, follower, protocol {} ({})", resp.generation_id,
                            resp.protocol_name, how);
    }
    respond(slot, resp, outcome);
  });
}

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& /*header*/,
                          const SyncGroupRequest& req) {
  coordinator_.sync_group(req, [slot](const SyncGroupResponse& resp, std::string_view how) {
    respond(slot, resp,
            resp.error_code != Errc::none
                ? std::string(how)
                : fmt::format("assigned {} ({})", describe_assignment_bytes(resp.assignment), how));
  });
}

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& /*header*/,
                          const HeartbeatRequest& req) {
  HeartbeatResponse resp;
  resp.error_code = coordinator_.heartbeat(req);
  respond(slot, resp, errc_name(resp.error_code));
}

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& /*header*/,
                          const LeaveGroupRequest& req) {
  LeaveGroupResponse resp;
  resp.error_code = coordinator_.leave_group(req);
  respond(slot, resp, errc_name(resp.error_code));
}

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& /*header*/,
                          const OffsetCommitRequest& req) {
  const OffsetCommitResponse resp = coordinator_.commit_offsets(req);
  std::string outcome;
  for (std::size_t t = 0; t < req.topics.size(); ++t) {
    for (std::size_t p = 0; p < req.topics[t].partitions.size(); ++p) {
      const Errc error = resp.topics[t].partitions[p].error_code;
      const OffsetCommitPartition& part = req.topics[t].partitions[p];
      outcome += fmt::format("{}{}-{}@{}{}", outcome.empty() ? "" : ", ", req.topics[t].name,
                             part.partition_index, part.committed_offset,
                             error == Errc::none ? "" : ": " + errc_name(error));
    }
  }
  respond(slot, resp, outcome.empty() ? "nothing to commit" : "committed " + outcome);
}

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& /*header*/,
                          const OffsetFetchRequest& req) {
  const OffsetFetchResponse resp = coordinator_.fetch_offsets(req);
  std::string outcome;
  for (const OffsetFetchTopicResponse& t : resp.topics) {
    for (const OffsetFetchPartitionResponse& p : t.partitions) {
      outcome += fmt::format("{}{}-{}@{}", outcome.empty() ? "" : ", ", t.name, p.partition_index,
                             p.committed_offset);
    }
  }
  respond(slot, resp, outcome.empty() ? "no committed offset" : outcome);
}

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& /*header*/,
                          const ListGroupsRequest& /*req*/) {
  const ListGroupsResponse resp = coordinator_.list_groups();
  respond(slot, resp, fmt::format("{} group(s)", resp.groups.size()));
}

void GroupHandler::handle(const ResponseSlot& slot, const RequestHeader& /*header*/,
                          const DescribeGroupsRequest& req) {
  const DescribeGroupsResponse resp = coordinator_.describe_groups(req);
  std::string outcome;
  for (const DescribedGroup& g : resp.groups) {
    outcome += fmt::format("{}{}: {}, {} member(s)", outcome.empty() ? "" : "; ", g.group_id,
                           g.group_state, g.members.size());
  }
  respond(slot, resp, outcome);
}

}  // namespace purgatory::broker
