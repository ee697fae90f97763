#include "protocol/leave_group.hpp"

namespace purgatory::broker {

void write_body(Writer& w, const LeaveGroupRequest& req, std::int16_t /*version*/) {
  w.write_string(req.group_id);
  w.write_string(req.member_id);
}

LeaveGroupRequest read_leave_group_request(Reader& r, std::int16_t /*version*/) {
  LeaveGroupRequest req;
  req.group_id = r.read_string("leave_group.group_id");
  req.member_id = r.read_string("leave_group.member_id");
  return req;
}

void write_body(Writer& w, const LeaveGroupResponse& resp, std::int16_t version) {
  if (version >= 1) w.write_int32(resp.throttle_time_ms);
  w.write_int16(static_cast<std::int16_t>(resp.error_code));
}

LeaveGroupResponse read_leave_group_response(Reader& r, std::int16_t version) {
  LeaveGroupResponse resp;
  if (version >= 1) resp.throttle_time_ms = r.read_int32("leave_group.throttle_time_ms");
  resp.error_code = static_cast<Errc>(r.read_int16("leave_group.error_code"));
  return resp;
}

}  // namespace purgatory::broker
