#include "protocol/list_groups.hpp"

namespace purgatory::broker {

namespace {

constexpr std::size_t kGroupBytes = kMinStringBytes + kMinStringBytes;

}  // namespace

void write_body(Writer& /*w*/, const ListGroupsRequest& /*req*/, std::int16_t /*version*/) {}

ListGroupsRequest read_list_groups_request(Reader& /*r*/, std::int16_t /*version*/) {
  return {};
}

void write_body(Writer& w, const ListGroupsResponse& resp, std::int16_t version) {
  if (version >= 1) w.write_int32(resp.throttle_time_ms);
  w.write_int16(static_cast<std::int16_t>(resp.error_code));
  write_array(w, resp.groups, [](Writer& out, const ListedGroup& g) {
    out.write_string(g.group_id);
    out.write_string(g.protocol_type);
  });
}

ListGroupsResponse read_list_groups_response(Reader& r, std::int16_t version) {
  ListGroupsResponse resp;
  if (version >= 1) resp.throttle_time_ms = r.read_int32("list_groups.throttle_time_ms");
  resp.error_code = static_cast<Errc>(r.read_int16("list_groups.error_code"));
  resp.groups = read_array(r, "list_groups.groups", kGroupBytes, [](Reader& in) {
    ListedGroup g;
    g.group_id = in.read_string("list_groups.groups[].group_id");
    g.protocol_type = in.read_string("list_groups.groups[].protocol_type");
    return g;
  });
  return resp;
}

}  // namespace purgatory::broker
