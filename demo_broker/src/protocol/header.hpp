// Request and response headers (Kafka's RequestHeader.json / ResponseHeader.json).
//
// Request header v1: api_key int16, api_version int16, correlation_id int32, client_id nullable
// string. v2 (used by flexible request versions: ApiVersions v3+, InitProducerId v2+ here)
// appends a tagged-field section; client_id keeps its int16 length even then, so any broker can
// read the header of an ApiVersions request newer than it knows. Response header v0 is the
// correlation_id alone; v1 (flexible responses: InitProducerId v2+ here) appends a tagged-field
// section. ApiVersions responses always use v0, so a client can parse the error of a version it
// did not expect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/api_key.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct RequestHeader {
  ApiKey api_key = ApiKey::api_versions;
  std::int16_t api_version = 0;
  std::int32_t correlation_id = 0;
  std::optional<std::string> client_id;

  bool operator==(const RequestHeader&) const = default;
};

// 2 when the request version is flexible (is_flexible(): ApiVersions v3 and later, including
// versions this codec does not decode, so their correlation_id can still be answered), else 1.
[[nodiscard]] int request_header_version(ApiKey key, std::int16_t api_version) noexcept;
// 1 when the response version is flexible and not ApiVersions, else 0.
[[nodiscard]] int response_header_version(ApiKey key, std::int16_t api_version) noexcept;

void write_request_header(Writer& w, const RequestHeader& header);
// Reads any api key and version: support is checked later (decode_request_body), so the caller
// holds the correlation_id when it has to answer UNSUPPORTED_VERSION.
RequestHeader read_request_header(Reader& r);

// `header_version` is response_header_version() of the response: 0 or 1.
void write_response_header(Writer& w, std::int32_t correlation_id, int header_version = 0);
std::int32_t read_response_header(Reader& r, int header_version = 0);

}  // namespace purgatory::broker
