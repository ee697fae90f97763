#include "protocol/join_group.hpp"

namespace purgatory::broker {

namespace {

constexpr std::size_t kProtocolBytes = kMinStringBytes + kMinBytesBytes;  // name, metadata
constexpr std::size_t kMemberBytes = kMinStringBytes + kMinBytesBytes;    // member_id, metadata

}  // namespace

void write_body(Writer& w, const JoinGroupRequest& req, std::int16_t version) {
  w.write_string(req.group_id);
  w.write_int32(req.session_timeout_ms);
  if (version >= 1) w.write_int32(req.rebalance_timeout_ms);
  w.write_string(req.member_id);
  w.write_string(req.protocol_type);
  write_array(w, req.protocols, [](Writer& out, const JoinGroupProtocol& p) {
    out.write_string(p.name);
    out.write_bytes(p.metadata);
  });
}

JoinGroupRequest read_join_group_request(Reader& r, std::int16_t version) {
  JoinGroupRequest req;
  req.group_id = r.read_string("join_group.group_id");
  req.session_timeout_ms = r.read_int32("join_group.session_timeout_ms");
  if (version >= 1) req.rebalance_timeout_ms = r.read_int32("join_group.rebalance_timeout_ms");
  req.member_id = r.read_string("join_group.member_id");
  req.protocol_type = r.read_string("join_group.protocol_type");
  req.protocols = read_array(r, "join_group.protocols", kProtocolBytes, [](Reader& in) {
    JoinGroupProtocol p;
    p.name = in.read_string("join_group.protocols[].name");
    p.metadata = in.read_bytes("join_group.protocols[].metadata");
    return p;
  });
  return req;
}

void write_body(Writer& w, const JoinGroupResponse& resp, std::int16_t version) {
  if (version >= 2) w.write_int32(resp.throttle_time_ms);
  w.write_int16(static_cast<std::int16_t>(resp.error_code));
  w.write_int32(resp.generation_id);
  w.write_string(resp.protocol_name);
  w.write_string(resp.leader);
  w.write_string(resp.member_id);
  write_array(w, resp.members, [](Writer& out, const JoinGroupMember& m) {
    out.write_string(m.member_id);
    out.write_bytes(m.metadata);
  });
}

JoinGroupResponse read_join_group_response(Reader& r, std::int16_t version) {
  JoinGroupResponse resp;
  if (version >= 2) resp.throttle_time_ms = r.read_int32("join_group.throttle_time_ms");
  resp.error_code = static_cast<Errc>(r.read_int16("join_group.error_code"));
  resp.generation_id = r.read_int32("join_group.generation_id");
  resp.protocol_name = r.read_string("join_group.protocol_name");
  resp.leader = r.read_string("join_group.leader");
  resp.member_id = r.read_string("join_group.member_id");
  resp.members = read_array(r, "join_group.members", kMemberBytes, [](Reader& in) {
    JoinGroupMember m;
    m.member_id = in.read_string("join_group.members[].member_id");
    m.metadata = in.read_bytes("join_group.members[].metadata");
    return m;
  });
  return resp;
}

}  // namespace purgatory::broker
