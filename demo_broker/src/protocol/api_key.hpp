// The Kafka APIs this codec speaks, the versions it can encode and decode (all of them
// advertised by the broker, see broker_api_versions() in api_versions.hpp), and which versions of
// each api are "flexible" (KIP-482: compact strings and arrays, tagged fields, header v2/v1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace purgatory::broker {

// Kafka's api keys. Int16-based, so an unknown key read off the wire is still representable.
enum class ApiKey : std::int16_t {
  produce = 0,
  fetch = 1,
  list_offsets = 2,
  metadata = 3,
  offset_commit = 8,
  offset_fetch = 9,
  find_coordinator = 10,
  join_group = 11,
  heartbeat = 12,
  leave_group = 13,
  sync_group = 14,
  describe_groups = 15,
  list_groups = 16,
  api_versions = 18,
  init_producer_id = 22,
};

// Kafka's name for the api ("Metadata"), or "ApiKey(<n>)" for keys this codec does not know.
[[nodiscard]] std::string api_key_name(ApiKey key);

// Thread-safety: every struct here is a plain value type, thread-compatible.
// An inclusive version range.
struct VersionRange {
  std::int16_t min = 0;
  std::int16_t max = 0;

  [[nodiscard]] constexpr bool contains(std::int16_t v) const noexcept {
    return v >= min && v <= max;
  }
  bool operator==(const VersionRange&) const = default;
};

// Versions of `key` this codec encodes and decodes; nullopt for a key it does not know.
// ApiVersions 0..3, Metadata 0..8, Produce 3..4, Fetch 4, ListOffsets 1, InitProducerId 0..5; the
// consumer-group APIs in their non-flexible versions without static membership: FindCoordinator
// 0..2, JoinGroup 0..4, SyncGroup 0..2, Heartbeat 0..2, LeaveGroup 0..1, OffsetCommit 0..6,
// OffsetFetch 0..5, ListGroups 0..2, DescribeGroups 0..2.
[[nodiscard]] std::optional<VersionRange> codec_versions(ApiKey key) noexcept;

// True when `version` of `key` is a flexible version in Kafka's message specs, also for versions
// this codec does not decode (Metadata v9+, Produce v9+, ...), so the header of any request of a
// known api is read right. Flexible requests use request header v2; flexible responses header v1,
// except ApiVersions, whose response always uses header v0 (so any client can read its error).
// False for keys this codec does not know.
[[nodiscard]] bool is_flexible(ApiKey key, std::int16_t version) noexcept;

}  // namespace purgatory::broker
