#include "protocol/find_coordinator.hpp"

#include <stdexcept>

namespace purgatory::broker {

void write_body(Writer& w, const FindCoordinatorRequest& req, std::int16_t version) {
  w.write_string(req.key);
  if (version >= 1) {
    w.write_int8(req.key_type);
  } else if (req.key_type != kCoordinatorKeyGroup) {
    throw std::invalid_argument("FindCoordinator v0 can only look up a group coordinator");
  }
}

FindCoordinatorRequest read_find_coordinator_request(Reader& r, std::int16_t version) {
  FindCoordinatorRequest req;
  req.key = r.read_string("find_coordinator.key");
  if (version >= 1) req.key_type = r.read_int8("find_coordinator.key_type");
  return req;
}

void write_body(Writer& w, const FindCoordinatorResponse& resp, std::int16_t version) {
  if (version >= 1) w.write_int32(resp.throttle_time_ms);
  w.write_int16(static_cast<std::int16_t>(resp.error_code));
  if (version >= 1) w.write_nullable_string(resp.error_message);
  w.write_int32(resp.node_id);
  w.write_string(resp.host);
  w.write_int32(resp.port);
}

FindCoordinatorResponse read_find_coordinator_response(Reader& r, std::int16_t version) {
  FindCoordinatorResponse resp;
  if (version >= 1) resp.throttle_time_ms = r.read_int32("find_coordinator.throttle_time_ms");
  resp.error_code = static_cast<Errc>(r.read_int16("find_coordinator.error_code"));
  if (version >= 1) {
    resp.error_message = r.read_nullable_string("find_coordinator.error_message");
  }
  resp.node_id = r.read_int32("find_coordinator.node_id");
  resp.host = r.read_string("find_coordinator.host");
  resp.port = r.read_int32("find_coordinator.port");
  return resp;
}

}  // namespace purgatory::broker
