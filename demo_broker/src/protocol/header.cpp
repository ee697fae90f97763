#include "protocol/header.hpp"

namespace purgatory::broker {

int request_header_version(ApiKey key, std::int16_t api_version) noexcept {
  return is_flexible(key, api_version) ? 2 : 1;
}

int response_header_version(ApiKey key, std::int16_t api_version) noexcept {
  return key != ApiKey::api_versions && is_flexible(key, api_version) ? 1 : 0;
}

void write_request_header(Writer& w, const RequestHeader& header) {
  w.write_int16(static_cast<std::int16_t>(header.api_key));
  w.write_int16(header.api_version);
  w.write_int32(header.correlation_id);
  w.write_nullable_string(header.client_id);
  if (request_header_version(header.api_key, header.api_version) >= 2) {
    w.write_empty_tagged_fields();
  }
}

RequestHeader read_request_header(Reader& r) {
  RequestHeader h;
  h.api_key = static_cast<ApiKey>(r.read_int16("request_header.api_key"));
  h.api_version = r.read_int16("request_header.api_version");
  h.correlation_id = r.read_int32("request_header.correlation_id");
  h.client_id = r.read_nullable_string("request_header.client_id");
  if (request_header_version(h.api_key, h.api_version) >= 2) {
    r.skip_tagged_fields("request_header.tagged_fields");
  }
  return h;
}

void write_response_header(Writer& w, std::int32_t correlation_id, int header_version) {
  w.write_int32(correlation_id);
  if (header_version >= 1) w.write_empty_tagged_fields();
}

std::int32_t read_response_header(Reader& r, int header_version) {
  const std::int32_t correlation_id = r.read_int32("response_header.correlation_id");
  if (header_version >= 1) r.skip_tagged_fields("response_header.tagged_fields");
  return correlation_id;
}

}  // namespace purgatory::broker
