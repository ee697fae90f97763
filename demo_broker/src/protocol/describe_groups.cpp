#include "protocol/describe_groups.hpp"

namespace purgatory::broker {

namespace {

// error_code, group_id, group_state, protocol_type, protocol_data, members
constexpr std::size_t kGroupBytes = 2 + 4 * kMinStringBytes + kMinArrayBytes;
constexpr std::size_t kMemberBytes = 3 * kMinStringBytes + 2 * kMinBytesBytes;

DescribedGroupMember read_member(Reader& r) {
  DescribedGroupMember m;
  m.member_id = r.read_string("describe_groups.groups[].members[].member_id");
  m.client_id = r.read_string("describe_groups.groups[].members[].client_id");
  m.client_host = r.read_string("describe_groups.groups[].members[].client_host");
  m.member_metadata = r.read_bytes("describe_groups.groups[].members[].member_metadata");
  m.member_assignment = r.read_bytes("describe_groups.groups[].members[].member_assignment");
  return m;
}

void write_member(Writer& w, const DescribedGroupMember& m) {
  w.write_string(m.member_id);
  w.write_string(m.client_id);
  w.write_string(m.client_host);
  w.write_bytes(m.member_metadata);
  w.write_bytes(m.member_assignment);
}

}  // namespace

void write_body(Writer& w, const DescribeGroupsRequest& req, std::int16_t /*version*/) {
  write_array(w, req.groups, [](Writer& out, const std::string& g) { out.write_string(g); });
}

DescribeGroupsRequest read_describe_groups_request(Reader& r, std::int16_t /*version*/) {
  DescribeGroupsRequest req;
  req.groups = read_array(r, "describe_groups.groups", kMinStringBytes,
                          [](Reader& in) { return in.read_string("describe_groups.groups[]"); });
  return req;
}

void write_body(Writer& w, const DescribeGroupsResponse& resp, std::int16_t version) {
  if (version >= 1) w.write_int32(resp.throttle_time_ms);
  write_array(w, resp.groups, [](Writer& out, const DescribedGroup& g) {
    out.write_int16(static_cast<std::int16_t>(g.error_code));
    out.write_string(g.group_id);
    out.write_string(g.group_state);
    out.write_string(g.protocol_type);
    out.write_string(g.protocol_data);
    write_array(out, g.members, write_member);
  });
}

DescribeGroupsResponse read_describe_groups_response(Reader& r, std::int16_t version) {
  DescribeGroupsResponse resp;
  if (version >= 1) resp.throttle_time_ms = r.read_int32("describe_groups.throttle_time_ms");
  resp.groups = read_array(r, "describe_groups.groups", kGroupBytes, [](Reader& in) {
    DescribedGroup g;
    g.error_code = static_cast<Errc>(in.read_int16("describe_groups.groups[].error_code"));
    g.group_id = in.read_string("describe_groups.groups[].group_id");
    g.group_state = in.read_string("describe_groups.groups[].group_state");
    g.protocol_type = in.read_string("describe_groups.groups[].protocol_type");
    g.protocol_data = in.read_string("describe_groups.groups[].protocol_data");
    g.members = read_array(in, "describe_groups.groups[].members", kMemberBytes, read_member);
    return g;
  });
  return resp;
}

}  // namespace purgatory::broker
