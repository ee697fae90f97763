// The Kafka APIs this codec speaks, and the versions it can encode and decode.
//
// What the codec can decode is not quite what the broker advertises (see broker_api_versions()
// in api_versions.hpp): ApiVersions v3 is decoded and answered, because clients send it before
// they know what the broker supports, but it is not advertised.
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
  api_versions = 18,
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
// ApiVersions 0..3, Metadata 0..4, Produce 3, Fetch 4, ListOffsets 1.
[[nodiscard]] std::optional<VersionRange> codec_versions(ApiKey key) noexcept;

}  // namespace purgatory::broker
