#include "purgatory/broker/api_key.hpp"

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
    case ApiKey::api_versions:
      return "ApiVersions";
  }
  return fmt::format("ApiKey({})", static_cast<int>(key));
}

std::optional<VersionRange> codec_versions(ApiKey key) noexcept {
  switch (key) {
    case ApiKey::produce:
      return VersionRange{3, 3};
    case ApiKey::fetch:
      return VersionRange{4, 4};
    case ApiKey::list_offsets:
      return VersionRange{1, 1};
    case ApiKey::metadata:
      return VersionRange{0, 4};
    case ApiKey::api_versions:
      return VersionRange{0, 3};
  }
  return std::nullopt;
}

}  // namespace purgatory::broker
