// FindCoordinator (key 10), versions 0..2: which broker coordinates a consumer group. The demo
// broker is the only one, so it always answers with itself.
//
// Request: key (the group id), key_type (v1+: 0 group, 1 transaction). Response:
// throttle_time_ms (v1+), error_code, error_message (v1+, nullable), node_id, host, port. v2 is
// v1 again (Kafka bumped it for quota behaviour).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

inline constexpr std::int8_t kCoordinatorKeyGroup = 0;
inline constexpr std::int8_t kCoordinatorKeyTransaction = 1;

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct FindCoordinatorRequest {
  std::string key;
  std::int8_t key_type = kCoordinatorKeyGroup;  // v1+

  bool operator==(const FindCoordinatorRequest&) const = default;
};

struct FindCoordinatorResponse {
  std::int32_t throttle_time_ms = 0;  // v1+
  Errc error_code = Errc::none;
  std::optional<std::string> error_message;  // v1+
  std::int32_t node_id = -1;
  std::string host;
  std::int32_t port = -1;

  bool operator==(const FindCoordinatorResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions(). write_body throws
// std::invalid_argument for a key_type other than group at v0 (it has no such field).
void write_body(Writer& w, const FindCoordinatorRequest& req, std::int16_t version);
FindCoordinatorRequest read_find_coordinator_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const FindCoordinatorResponse& resp, std::int16_t version);
FindCoordinatorResponse read_find_coordinator_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
