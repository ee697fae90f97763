#include "protocol/codec.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "protocol/framing.hpp"

namespace purgatory::broker {

namespace {

// Per-message facts the generic encode/decode paths need.
template <class T>
struct Traits;

template <>
struct Traits<ApiVersionsRequest> {
  static constexpr ApiKey kKey = ApiKey::api_versions;
};
template <>
struct Traits<MetadataRequest> {
  static constexpr ApiKey kKey = ApiKey::metadata;
};
template <>
struct Traits<ProduceRequest> {
  static constexpr ApiKey kKey = ApiKey::produce;
};
template <>
struct Traits<FetchRequest> {
  static constexpr ApiKey kKey = ApiKey::fetch;
};
template <>
struct Traits<ListOffsetsRequest> {
  static constexpr ApiKey kKey = ApiKey::list_offsets;
};
template <>
struct Traits<ApiVersionsResponse> {
  static constexpr ApiKey kKey = ApiKey::api_versions;
  static ApiVersionsResponse read(Reader& r, std::int16_t v) {
    return read_api_versions_response(r, v);
  }
};
template <>
struct Traits<MetadataResponse> {
  static constexpr ApiKey kKey = ApiKey::metadata;
  static MetadataResponse read(Reader& r, std::int16_t v) { return read_metadata_response(r, v); }
};
template <>
struct Traits<ProduceResponse> {
  static constexpr ApiKey kKey = ApiKey::produce;
  static ProduceResponse read(Reader& r, std::int16_t v) { return read_produce_response(r, v); }
};
template <>
struct Traits<FetchResponse> {
  static constexpr ApiKey kKey = ApiKey::fetch;
  static FetchResponse read(Reader& r, std::int16_t v) { return read_fetch_response(r, v); }
};
template <>
struct Traits<ListOffsetsResponse> {
  static constexpr ApiKey kKey = ApiKey::list_offsets;
  static ListOffsetsResponse read(Reader& r, std::int16_t v) {
    return read_list_offsets_response(r, v);
  }
};

template <>
struct Traits<FindCoordinatorRequest> {
  static constexpr ApiKey kKey = ApiKey::find_coordinator;
};
template <>
struct Traits<FindCoordinatorResponse> {
  static constexpr ApiKey kKey = ApiKey::find_coordinator;
  static FindCoordinatorResponse read(Reader& r, std::int16_t v) {
    return read_find_coordinator_response(r, v);
  }
};
template <>
struct Traits<JoinGroupRequest> {
  static constexpr ApiKey kKey = ApiKey::join_group;
};
template <>
struct Traits<JoinGroupResponse> {
  static constexpr ApiKey kKey = ApiKey::join_group;
  static JoinGroupResponse read(Reader& r, std::int16_t v) {
    return read_join_group_response(r, v);
  }
};
template <>
struct Traits<SyncGroupRequest> {
  static constexpr ApiKey kKey = ApiKey::sync_group;
};
template <>
struct Traits<SyncGroupResponse> {
  static constexpr ApiKey kKey = ApiKey::sync_group;
  static SyncGroupResponse read(Reader& r, std::int16_t v) {
    return read_sync_group_response(r, v);
  }
};
template <>
struct Traits<HeartbeatRequest> {
  static constexpr ApiKey kKey = ApiKey::heartbeat;
};
template <>
struct Traits<HeartbeatResponse> {
  static constexpr ApiKey kKey = ApiKey::heartbeat;
  static HeartbeatResponse read(Reader& r, std::int16_t v) { return read_heartbeat_response(r, v); }
};
template <>
struct Traits<LeaveGroupRequest> {
  static constexpr ApiKey kKey = ApiKey::leave_group;
};
template <>
struct Traits<LeaveGroupResponse> {
  static constexpr ApiKey kKey = ApiKey::leave_group;
  static LeaveGroupResponse read(Reader& r, std::int16_t v) {
    return read_leave_group_response(r, v);
  }
};
template <>
struct Traits<OffsetCommitRequest> {
  static constexpr ApiKey kKey = ApiKey::offset_commit;
};
template <>
struct Traits<OffsetCommitResponse> {
  static constexpr ApiKey kKey = ApiKey::offset_commit;
  static OffsetCommitResponse read(Reader& r, std::int16_t v) {
    return read_offset_commit_response(r, v);
  }
};
template <>
struct Traits<OffsetFetchRequest> {
  static constexpr ApiKey kKey = ApiKey::offset_fetch;
};
template <>
struct Traits<OffsetFetchResponse> {
  static constexpr ApiKey kKey = ApiKey::offset_fetch;
  static OffsetFetchResponse read(Reader& r, std::int16_t v) {
    return read_offset_fetch_response(r, v);
  }
};
template <>
struct Traits<ListGroupsRequest> {
  static constexpr ApiKey kKey = ApiKey::list_groups;
};
template <>
struct Traits<ListGroupsResponse> {
  static constexpr ApiKey kKey = ApiKey::list_groups;
  static ListGroupsResponse read(Reader& r, std::int16_t v) {
    return read_list_groups_response(r, v);
  }
};
template <>
struct Traits<DescribeGroupsRequest> {
  static constexpr ApiKey kKey = ApiKey::describe_groups;
};
template <>
struct Traits<DescribeGroupsResponse> {
  static constexpr ApiKey kKey = ApiKey::describe_groups;
  static DescribeGroupsResponse read(Reader& r, std::int16_t v) {
    return read_describe_groups_response(r, v);
  }
};

template <>
struct Traits<InitProducerIdRequest> {
  static constexpr ApiKey kKey = ApiKey::init_producer_id;
};
template <>
struct Traits<InitProducerIdResponse> {
  static constexpr ApiKey kKey = ApiKey::init_producer_id;
  static InitProducerIdResponse read(Reader& r, std::int16_t v) {
    return read_init_producer_id_response(r, v);
  }
};

// Encoders are called by our own code: a version outside the codec is a caller bug.
void require_encodable(ApiKey key, std::int16_t version, const char* what) {
  const std::optional<VersionRange> range = codec_versions(key);
  if (!range || !range->contains(version)) {
    throw std::invalid_argument(
        fmt::format("{} {} v{} is not supported by this codec", api_key_name(key), what, version));
  }
}

template <class Req>
Bytes encode_request_impl(const Req& req, std::int16_t version, std::int32_t correlation_id,
                          const std::optional<std::string>& client_id) {
  require_encodable(Traits<Req>::kKey, version, "request");
  Writer w = begin_frame();
  write_request_header(w, RequestHeader{Traits<Req>::kKey, version, correlation_id, client_id});
  write_body(w, req, version);
  return finish_frame(std::move(w));
}

template <class Resp>
Bytes encode_response_impl(const Resp& resp, std::int16_t version, std::int32_t correlation_id) {
  require_encodable(Traits<Resp>::kKey, version, "response");
  Writer w = begin_frame();
  write_response_header(w, correlation_id, response_header_version(Traits<Resp>::kKey, version));
  write_body(w, resp, version);
  return finish_frame(std::move(w));
}

}  // namespace

void check_supported(ApiKey key, std::int16_t api_version) {
  const std::optional<VersionRange> range = codec_versions(key);
  if (!range) {
    throw DecodeError(
        DecodeErrorKind::unsupported_api,
        fmt::format("request_header.api_key: {} is not supported", static_cast<int>(key)));
  }
  if (!range->contains(api_version)) {
    throw DecodeError(DecodeErrorKind::unsupported_version,
                      fmt::format("request_header.api_version: {} v{} is not supported "
                                  "(supported: v{}..v{})",
                                  api_key_name(key), api_version, range->min, range->max));
  }
}

RequestBody decode_request_body(const RequestHeader& header, Reader& r) {
  check_supported(header.api_key, header.api_version);
  const std::int16_t v = header.api_version;
  RequestBody body = [&]() -> RequestBody {
    switch (header.api_key) {
      case ApiKey::produce:
        return read_produce_request(r, v);
      case ApiKey::fetch:
        return read_fetch_request(r, v);
      case ApiKey::list_offsets:
        return read_list_offsets_request(r, v);
      case ApiKey::metadata:
        return read_metadata_request(r, v);
      case ApiKey::api_versions:
        return read_api_versions_request(r, v);
      case ApiKey::find_coordinator:
        return read_find_coordinator_request(r, v);
      case ApiKey::join_group:
        return read_join_group_request(r, v);
      case ApiKey::sync_group:
        return read_sync_group_request(r, v);
      case ApiKey::heartbeat:
        return read_heartbeat_request(r, v);
      case ApiKey::leave_group:
        return read_leave_group_request(r, v);
      case ApiKey::offset_commit:
        return read_offset_commit_request(r, v);
      case ApiKey::offset_fetch:
        return read_offset_fetch_request(r, v);
      case ApiKey::list_groups:
        return read_list_groups_request(r, v);
      case ApiKey::describe_groups:
        return read_describe_groups_request(r, v);
      case ApiKey::init_producer_id:
        return read_init_producer_id_request(r, v);
    }
    // check_supported() accepted the key, so the switch covers it.
    throw std::logic_error("decode_request_body: api key passed check_supported but is unhandled");
  }();
  r.expect_end(fmt::format("{} v{} request", api_key_name(header.api_key), v));
  return body;
}

Request decode_request(ByteView payload) {
  Reader r(payload);
  RequestHeader header = read_request_header(r);
  RequestBody body = decode_request_body(header, r);
  return Request{std::move(header), std::move(body)};
}

Bytes encode_response(const ApiVersionsResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const MetadataResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const ProduceResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const FetchResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const ListOffsetsResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}

Bytes encode_request(const ApiVersionsRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const MetadataRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const ProduceRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const FetchRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const ListOffsetsRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}

Bytes encode_response(const FindCoordinatorResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const JoinGroupResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const SyncGroupResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const HeartbeatResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const LeaveGroupResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const OffsetCommitResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const OffsetFetchResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const ListGroupsResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_response(const DescribeGroupsResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}

Bytes encode_request(const FindCoordinatorRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const JoinGroupRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const SyncGroupRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const HeartbeatRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const LeaveGroupRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const OffsetCommitRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const OffsetFetchRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const ListGroupsRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}
Bytes encode_request(const DescribeGroupsRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}

Bytes encode_response(const InitProducerIdResponse& resp, std::int16_t version,
                      std::int32_t correlation_id) {
  return encode_response_impl(resp, version, correlation_id);
}
Bytes encode_request(const InitProducerIdRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id) {
  return encode_request_impl(req, version, correlation_id, client_id);
}

template <class Body>
Response<Body> decode_response(ByteView payload, std::int16_t version) {
  require_encodable(Traits<Body>::kKey, version, "response");
  Reader r(payload);
  Response<Body> out;
  out.correlation_id =
      read_response_header(r, response_header_version(Traits<Body>::kKey, version));
  out.body = Traits<Body>::read(r, version);
  r.expect_end(fmt::format("{} v{} response", api_key_name(Traits<Body>::kKey), version));
  return out;
}

template Response<ApiVersionsResponse> decode_response(ByteView, std::int16_t);
template Response<MetadataResponse> decode_response(ByteView, std::int16_t);
template Response<ProduceResponse> decode_response(ByteView, std::int16_t);
template Response<FetchResponse> decode_response(ByteView, std::int16_t);
template Response<ListOffsetsResponse> decode_response(ByteView, std::int16_t);
template Response<FindCoordinatorResponse> decode_response(ByteView, std::int16_t);
template Response<JoinGroupResponse> decode_response(ByteView, std::int16_t);
template Response<SyncGroupResponse> decode_response(ByteView, std::int16_t);
template Response<HeartbeatResponse> decode_response(ByteView, std::int16_t);
template Response<LeaveGroupResponse> decode_response(ByteView, std::int16_t);
template Response<OffsetCommitResponse> decode_response(ByteView, std::int16_t);
template Response<OffsetFetchResponse> decode_response(ByteView, std::int16_t);
template Response<ListGroupsResponse> decode_response(ByteView, std::int16_t);
template Response<DescribeGroupsResponse> decode_response(ByteView, std::int16_t);
template Response<InitProducerIdResponse> decode_response(ByteView, std::int16_t);

}  // namespace purgatory::broker
