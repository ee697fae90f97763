// DescribeGroups (key 15), versions 0..2: a group's state, protocol and members, for tools.
//
// Request: groups [group_id]. Response: throttle_time_ms (v1+), groups [error_code, group_id,
// group_state, protocol_type, protocol_data, members [member_id, client_id, client_host,
// member_metadata, member_assignment]]. The state is Kafka's name (Empty, PreparingRebalance,
// CompletingRebalance, Stable, Dead; a group nobody knows is Dead); the protocol, metadata and
// assignment are filled only while the group is Stable. v2 is v1 again; v3+ (authorized
// operations, static members) are not spoken.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct DescribeGroupsRequest {
  std::vector<std::string> groups;

  bool operator==(const DescribeGroupsRequest&) const = default;
};

struct DescribedGroupMember {
  std::string member_id;
  std::string client_id;
  std::string client_host;
  Bytes member_metadata;
  Bytes member_assignment;

  bool operator==(const DescribedGroupMember&) const = default;
};

struct DescribedGroup {
  Errc error_code = Errc::none;
  std::string group_id;
  std::string group_state;
  std::string protocol_type;
  std::string protocol_data;  // the selected protocol's name ("range")
  std::vector<DescribedGroupMember> members;

  bool operator==(const DescribedGroup&) const = default;
};

struct DescribeGroupsResponse {
  std::int32_t throttle_time_ms = 0;  // v1+
  std::vector<DescribedGroup> groups;

  bool operator==(const DescribeGroupsResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions().
void write_body(Writer& w, const DescribeGroupsRequest& req, std::int16_t version);
DescribeGroupsRequest read_describe_groups_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const DescribeGroupsResponse& resp, std::int16_t version);
DescribeGroupsResponse read_describe_groups_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
