// LeaveGroup (key 13), versions 0..1: a member ends its session at once (a consumer closing), so
// the group rebalances without waiting for its session to expire.
//
// Request: group_id, member_id. Response: throttle_time_ms (v1+), error_code. v2 is v1 again and
// not needed by any client here; v3+ leave a batch of (static) members.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct LeaveGroupRequest {
  std::string group_id;
  std::string member_id;

  bool operator==(const LeaveGroupRequest&) const = default;
};

struct LeaveGroupResponse {
  std::int32_t throttle_time_ms = 0;  // v1+
  Errc error_code = Errc::none;

  bool operator==(const LeaveGroupResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions().
void write_body(Writer& w, const LeaveGroupRequest& req, std::int16_t version);
LeaveGroupRequest read_leave_group_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const LeaveGroupResponse& resp, std::int16_t version);
LeaveGroupResponse read_leave_group_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
