// SyncGroup (key 14), versions 0..2: after a join phase every member asks for its assignment; the
// leader's request carries everyone's, which the coordinator hands out unread.
//
// Request: group_id, generation_id, member_id, assignments [member_id, assignment] (the leader's
// only). Response: throttle_time_ms (v1+), error_code, assignment. v2 is v1 again; v3 (static
// membership) and the flexible v4+ are not spoken.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct SyncGroupAssignment {
  std::string member_id;
  Bytes assignment;  // opaque to the coordinator (a ConsumerProtocolAssignment for consumers)

  bool operator==(const SyncGroupAssignment&) const = default;
};

struct SyncGroupRequest {
  std::string group_id;
  std::int32_t generation_id = -1;
  std::string member_id;
  std::vector<SyncGroupAssignment> assignments;

  bool operator==(const SyncGroupRequest&) const = default;
};

struct SyncGroupResponse {
  std::int32_t throttle_time_ms = 0;  // v1+
  Errc error_code = Errc::none;
  Bytes assignment;

  bool operator==(const SyncGroupResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions().
void write_body(Writer& w, const SyncGroupRequest& req, std::int16_t version);
SyncGroupRequest read_sync_group_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const SyncGroupResponse& resp, std::int16_t version);
SyncGroupResponse read_sync_group_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
