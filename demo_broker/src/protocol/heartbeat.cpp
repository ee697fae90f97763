#include "protocol/heartbeat.hpp"

namespace purgatory::broker {

void write_body(Writer& w, const HeartbeatRequest& req, std::int16_t /*version*/) {
  w.write_string(req.group_id);
  w.write_int32(req.generation_id);
  w.write_string(req.member_id);
}

HeartbeatRequest read_heartbeat_request(Reader& r, std::int16_t /*version*/) {
  HeartbeatRequest req;
  req.group_id = r.read_string("heartbeat.group_id");
  req.generation_id = r.read_int32("heartbeat.generation_id");
  req.member_id = r.read_string("heartbeat.member_id");
  return req;
}

void write_body(Writer& w, const HeartbeatResponse& resp, std::int16_t version) {
  if (version >= 1) w.write_int32(resp.throttle_time_ms);
  w.write_int16(static_cast<std::int16_t>(resp.error_code));
}

HeartbeatResponse read_heartbeat_response(Reader& r, std::int16_t version) {
  HeartbeatResponse resp;
  if (version >= 1) resp.throttle_time_ms = r.read_int32("heartbeat.throttle_time_ms");
  resp.error_code = static_cast<Errc>(r.read_int16("heartbeat.error_code"));
  return resp;
}

}  // namespace purgatory::broker
