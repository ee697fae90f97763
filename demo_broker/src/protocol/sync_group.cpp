#include "protocol/sync_group.hpp"

namespace purgatory::broker {

namespace {

constexpr std::size_t kAssignmentBytes = kMinStringBytes + kMinBytesBytes;

}  // namespace

void write_body(Writer& w, const SyncGroupRequest& req, std::int16_t /*version*/) {
  w.write_string(req.group_id);
  w.write_int32(req.generation_id);
  w.write_string(req.member_id);
  write_array(w, req.assignments, [](Writer& out, const SyncGroupAssignment& a) {
    out.write_string(a.member_id);
    out.write_bytes(a.assignment);
  });
}

SyncGroupRequest read_sync_group_request(Reader& r, std::int16_t /*version*/) {
  SyncGroupRequest req;
  req.group_id = r.read_string("sync_group.group_id");
  req.generation_id = r.read_int32("sync_group.generation_id");
  req.member_id = r.read_string("sync_group.member_id");
  req.assignments = read_array(r, "sync_group.assignments", kAssignmentBytes, [](Reader& in) {
    SyncGroupAssignment a;
    a.member_id = in.read_string("sync_group.assignments[].member_id");
    a.assignment = in.read_bytes("sync_group.assignments[].assignment");
    return a;
  });
  return req;
}

void write_body(Writer& w, const SyncGroupResponse& resp, std::int16_t version) {
  if (version >= 1) w.write_int32(resp.throttle_time_ms);
  w.write_int16(static_cast<std::int16_t>(resp.error_code));
  w.write_bytes(resp.assignment);
}

SyncGroupResponse read_sync_group_response(Reader& r, std::int16_t version) {
  SyncGroupResponse resp;
  if (version >= 1) resp.throttle_time_ms = r.read_int32("sync_group.throttle_time_ms");
  resp.error_code = static_cast<Errc>(r.read_int16("sync_group.error_code"));
  resp.assignment = r.read_bytes("sync_group.assignment");
  return resp;
}

}  // namespace purgatory::broker
