// ListGroups (key 16), versions 0..2: every group the coordinator knows, for tools.
//
// Request: empty. Response: throttle_time_ms (v1+), error_code, groups [group_id, protocol_type].
// v2 is v1 again; the flexible v3+ (and v4's state filter) are not spoken.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct ListGroupsRequest {
  bool operator==(const ListGroupsRequest&) const = default;
};

struct ListedGroup {
  std::string group_id;
  std::string protocol_type;  // "" for a group that only commits offsets

  bool operator==(const ListedGroup&) const = default;
};

struct ListGroupsResponse {
  std::int32_t throttle_time_ms = 0;  // v1+
  Errc error_code = Errc::none;
  std::vector<ListedGroup> groups;

  bool operator==(const ListGroupsResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions().
void write_body(Writer& w, const ListGroupsRequest& req, std::int16_t version);
ListGroupsRequest read_list_groups_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const ListGroupsResponse& resp, std::int16_t version);
ListGroupsResponse read_list_groups_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
