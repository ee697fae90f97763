// ApiVersions (key 18), versions 0..3: the first request every client sends, to learn which
// versions of each api the broker speaks.
//
// v0..v2 requests have an empty body; v3 (the first flexible version) sends the client's software
// name and version as compact strings plus a tagged-field section. The response is error_code,
// the api table, throttle_time_ms (v1+); v3 encodes the table as a compact array with a tagged
// section per entry and ends with a tagged section of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/api_key.hpp"
#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct ApiVersionsRequest {
  std::string client_software_name;     // v3+; empty below
  std::string client_software_version;  // v3+; empty below

  bool operator==(const ApiVersionsRequest&) const = default;
};

struct ApiVersion {
  ApiKey api_key = ApiKey::api_versions;
  std::int16_t min_version = 0;
  std::int16_t max_version = 0;

  bool operator==(const ApiVersion&) const = default;
};

struct ApiVersionsResponse {
  Errc error_code = Errc::none;
  std::vector<ApiVersion> api_keys;
  std::int32_t throttle_time_ms = 0;  // v1+

  bool operator==(const ApiVersionsResponse&) const = default;
};

// What the demo broker advertises: every api at exactly the versions codec_versions() decodes
// and the broker answers: ApiVersions 0..3, Metadata 0..8, Produce 3..4, Fetch 4..4, ListOffsets
// 1..1, InitProducerId 0..5, and the consumer-group apis.
[[nodiscard]] std::vector<ApiVersion> broker_api_versions();

// Bodies only (no header, no frame). Precondition: `version` is within codec_versions().
void write_body(Writer& w, const ApiVersionsRequest& req, std::int16_t version);
ApiVersionsRequest read_api_versions_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const ApiVersionsResponse& resp, std::int16_t version);
ApiVersionsResponse read_api_versions_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
