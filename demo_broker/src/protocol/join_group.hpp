// JoinGroup (key 11), versions 0..4: a consumer asks to be a member of a group; the answer comes
// once the coordinator has completed the group's join phase (see GroupCoordinator).
//
// Request: group_id, session_timeout_ms, rebalance_timeout_ms (v1+), member_id ("" on the first
// join), protocol_type, protocols [name, metadata]. Response: throttle_time_ms (v2+), error_code,
// generation_id, protocol_name, leader, member_id, members [member_id, metadata] (filled for the
// leader only). v3 is v2 again; v4 changes only the semantics: a new member is answered
// MEMBER_ID_REQUIRED with its id and joins again with it (KIP-394). v5 (static membership) and the
// flexible v6+ are not spoken.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// The member id of a consumer that has none yet.
inline constexpr const char* kUnknownMemberId = "";

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct JoinGroupProtocol {
  std::string name;  // e.g. "range"
  Bytes metadata;    // opaque to the coordinator (a ConsumerProtocolSubscription for consumers)

  bool operator==(const JoinGroupProtocol&) const = default;
};

struct JoinGroupRequest {
  std::string group_id;
  std::int32_t session_timeout_ms = 0;
  std::int32_t rebalance_timeout_ms = -1;  // v1+; the coordinator uses the session timeout below
  std::string member_id;
  std::string protocol_type;  // "consumer"
  std::vector<JoinGroupProtocol> protocols;

  bool operator==(const JoinGroupRequest&) const = default;
};

struct JoinGroupMember {
  std::string member_id;
  Bytes metadata;

  bool operator==(const JoinGroupMember&) const = default;
};

struct JoinGroupResponse {
  std::int32_t throttle_time_ms = 0;  // v2+
  Errc error_code = Errc::none;
  std::int32_t generation_id = -1;
  std::string protocol_name;
  std::string leader;
  std::string member_id;
  std::vector<JoinGroupMember> members;  // the leader's answer only

  bool operator==(const JoinGroupResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions().
void write_body(Writer& w, const JoinGroupRequest& req, std::int16_t version);
JoinGroupRequest read_join_group_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const JoinGroupResponse& resp, std::int16_t version);
JoinGroupResponse read_join_group_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
