// Heartbeat (key 12), versions 0..2: a member tells the coordinator it is alive, and learns from
// the error code whether the group is rebalancing (REBALANCE_IN_PROGRESS: join again).
//
// Request: group_id, generation_id, member_id. Response: throttle_time_ms (v1+), error_code. v2
// is v1 again; v3 (static membership) and the flexible v4+ are not spoken.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct HeartbeatRequest {
  std::string group_id;
  std::int32_t generation_id = -1;
  std::string member_id;

  bool operator==(const HeartbeatRequest&) const = default;
};

struct HeartbeatResponse {
  std::int32_t throttle_time_ms = 0;  // v1+
  Errc error_code = Errc::none;

  bool operator==(const HeartbeatResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions().
void write_body(Writer& w, const HeartbeatRequest& req, std::int16_t version);
HeartbeatRequest read_heartbeat_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const HeartbeatResponse& resp, std::int16_t version);
HeartbeatResponse read_heartbeat_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
