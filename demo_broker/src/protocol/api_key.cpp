#include "protocol/api_key.hpp"

#include <fmt/format.h>

namespace purgatory::broker {

std::string api_key_name(ApiKey key) {
  switch (key) {
    case ApiKey::produce:
      return "Produce";
    case ApiKey::fetch:
      return "Fetch";
    case ApiKey::list_offsets:
      return "ListOffsets";
    case ApiKey::metadata:
      return "Metadata";
    case ApiKey::offset_commit:
      return "OffsetCommit";
    case ApiKey::offset_fetch:
      return "OffsetFetch";
    case ApiKey::find_coordinator:
      return "FindCoordinator";
    case ApiKey::join_group:
      return "JoinGroup";
    case ApiKey::heartbeat:
      return "Heartbeat";
    case ApiKey::leave_group:
      return "LeaveGroup";
    case ApiKey::sync_group:
      return "SyncGroup";
    case ApiKey::describe_groups:
      return "DescribeGroups";
    case ApiKey::list_groups:
      return "ListGroups";
    case ApiKey::api_versions:
      return "ApiVersions";
    case ApiKey::init_producer_id:
      return "InitProducerId";
  }
  return fmt::format("ApiKey({})", static_cast<int>(key));
}

std::optional<VersionRange> codec_versions(ApiKey key) noexcept {
  switch (key) {
    case ApiKey::produce:
      return VersionRange{3, 4};
    case ApiKey::fetch:
      return VersionRange{4, 4};
    case ApiKey::list_offsets:
      return VersionRange{1, 1};
    case ApiKey::metadata:
      return VersionRange{0, 8};
    case ApiKey::offset_commit:
      return VersionRange{0, 6};
    case ApiKey::offset_fetch:
      return VersionRange{0, 5};
    case ApiKey::find_coordinator:
      return VersionRange{0, 2};
    case ApiKey::join_group:
      return VersionRange{0, 4};
    case ApiKey::heartbeat:
      return VersionRange{0, 2};
    case ApiKey::leave_group:
      return VersionRange{0, 1};
    case ApiKey::sync_group:
      return VersionRange{0, 2};
    case ApiKey::describe_groups:
      return VersionRange{0, 2};
    case ApiKey::list_groups:
      return VersionRange{0, 2};
    case ApiKey::api_versions:
      return VersionRange{0, 3};
    case ApiKey::init_producer_id:
      return VersionRange{0, 5};
  }
  return std::nullopt;
}

bool is_flexible(ApiKey key, std::int16_t version) noexcept {
  // The first flexible version of each api ("flexibleVersions" in Kafka's message specs).
  const auto first_flexible = [](ApiKey k) -> int {
    switch (k) {
      case ApiKey::produce:
      case ApiKey::metadata:
        return 9;
      case ApiKey::fetch:
        return 12;
      case ApiKey::list_offsets:
      case ApiKey::offset_fetch:
        return 6;
      case ApiKey::offset_commit:
        return 8;
      case ApiKey::find_coordinator:
      case ApiKey::list_groups:
      case ApiKey::api_versions:
        return 3;
      case ApiKey::join_group:
        return 6;
      case ApiKey::heartbeat:
      case ApiKey::leave_group:
      case ApiKey::sync_group:
        return 4;
      case ApiKey::describe_groups:
        return 5;
      case ApiKey::init_producer_id:
        return 2;
    }
    return -1;
  };
  const int first = first_flexible(key);
  return first >= 0 && version >= first;
}

}  // namespace purgatory::broker
