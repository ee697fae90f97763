#include "protocol/api_versions.hpp"

namespace purgatory::broker {

namespace {

// api_key + min + max; v3 adds at least one byte of tagged fields.
constexpr std::size_t kApiVersionBytes = 6;

ApiVersion read_api_version(Reader& r) {
  ApiVersion v;
  v.api_key = static_cast<ApiKey>(r.read_int16("api_versions.api_keys[].api_key"));
  v.min_version = r.read_int16("api_versions.api_keys[].min_version");
  v.max_version = r.read_int16("api_versions.api_keys[].max_version");
  return v;
}

void write_api_version(Writer& w, const ApiVersion& v) {
  w.write_int16(static_cast<std::int16_t>(v.api_key));
  w.write_int16(v.min_version);
  w.write_int16(v.max_version);
}

}  // namespace

std::vector<ApiVersion> broker_api_versions() {
  // Exactly what codec_versions() decodes, so a client is never offered a version the broker
  // would then refuse.
  std::vector<ApiVersion> table;
  for (const ApiKey key :
       {ApiKey::produce, ApiKey::fetch, ApiKey::list_offsets, ApiKey::metadata,
        ApiKey::offset_commit, ApiKey::offset_fetch, ApiKey::find_coordinator, ApiKey::join_group,
        ApiKey::heartbeat, ApiKey::leave_group, ApiKey::sync_group, ApiKey::describe_groups,
        ApiKey::list_groups, ApiKey::api_versions, ApiKey::init_producer_id}) {
    const std::optional<VersionRange> range = codec_versions(key);
    table.push_back({key, range->min, range->max});
  }
  return table;
}

void write_body(Writer& w, const ApiVersionsRequest& req, std::int16_t version) {
  if (version < 3) return;
  w.write_compact_string(req.client_software_name);
  w.write_compact_string(req.client_software_version);
  w.write_empty_tagged_fields();
}

ApiVersionsRequest read_api_versions_request(Reader& r, std::int16_t version) {
  ApiVersionsRequest req;
  if (version < 3) return req;
  req.client_software_name = r.read_compact_string("api_versions.client_software_name");
  req.client_software_version = r.read_compact_string("api_versions.client_software_version");
  r.skip_tagged_fields("api_versions.tagged_fields");
  return req;
}

void write_body(Writer& w, const ApiVersionsResponse& resp, std::int16_t version) {
  w.write_int16(static_cast<std::int16_t>(resp.error_code));
  if (version >= 3) {
    w.write_compact_array_count(resp.api_keys.size());
    for (const ApiVersion& v : resp.api_keys) {
      write_api_version(w, v);
      w.write_empty_tagged_fields();
    }
  } else {
    write_array(w, resp.api_keys, write_api_version);
  }
  if (version >= 1) w.write_int32(resp.throttle_time_ms);
  if (version >= 3) w.write_empty_tagged_fields();
}

ApiVersionsResponse read_api_versions_response(Reader& r, std::int16_t version) {
  ApiVersionsResponse resp;
  resp.error_code = static_cast<Errc>(r.read_int16("api_versions.error_code"));
  if (version >= 3) {
    const std::size_t n = r.read_compact_array_count("api_versions.api_keys", kApiVersionBytes + 1);
    resp.api_keys.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      resp.api_keys.push_back(read_api_version(r));
      r.skip_tagged_fields("api_versions.api_keys[].tagged_fields");
    }
  } else {
    resp.api_keys = read_array(r, "api_versions.api_keys", kApiVersionBytes, read_api_version);
  }
  if (version >= 1) resp.throttle_time_ms = r.read_int32("api_versions.throttle_time_ms");
  if (version >= 3) r.skip_tagged_fields("api_versions.tagged_fields");
  return resp;
}

}  // namespace purgatory::broker
