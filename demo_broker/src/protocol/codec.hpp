// Whole Kafka messages: size prefix + header + body, in both directions.
//
//   server: read 4 bytes -> decode_frame_size() -> read the payload -> read_request_header()
//           -> decode_request_body() -> handle -> encode_response()
//   client: encode_request() -> write; read a frame -> decode_response<T>()
//
// The server decodes the header on its own first so that it holds the correlation_id when the
// body turns out to be an api or version this codec does not speak (DecodeError kinds
// unsupported_api / unsupported_version): it can then answer, e.g. with an ApiVersions v0
// response carrying UNSUPPORTED_VERSION, instead of closing. encode_* return complete frames
// ready for the socket; decode_* take the payload after the size prefix.
//
// Errors: decoders throw DecodeError; encoders throw std::invalid_argument for a version outside
// codec_versions() or a value the version cannot carry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "protocol/api_versions.hpp"
#include "protocol/describe_groups.hpp"
#include "protocol/fetch.hpp"
#include "protocol/find_coordinator.hpp"
#include "protocol/header.hpp"
#include "protocol/heartbeat.hpp"
#include "protocol/init_producer_id.hpp"
#include "protocol/join_group.hpp"
#include "protocol/leave_group.hpp"
#include "protocol/list_groups.hpp"
#include "protocol/list_offsets.hpp"
#include "protocol/metadata.hpp"
#include "protocol/offset_commit.hpp"
#include "protocol/offset_fetch.hpp"
#include "protocol/produce.hpp"
#include "protocol/sync_group.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
using RequestBody =
    std::variant<ProduceRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
                 ApiVersionsRequest, FindCoordinatorRequest, JoinGroupRequest, SyncGroupRequest,
                 HeartbeatRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest,
                 ListGroupsRequest, DescribeGroupsRequest, InitProducerIdRequest>;

struct Request {
  RequestHeader header;
  RequestBody body;
};

// Throws DecodeError(unsupported_api) for a key codec_versions() does not know and
// DecodeError(unsupported_version) for a version outside its range.
void check_supported(ApiKey key, std::int16_t api_version);

// ---- server side ------------------------------------------------------------------------------

// Decodes the body that follows `header` in `r` and requires `r` to end there (trailing_bytes).
RequestBody decode_request_body(const RequestHeader& header, Reader& r);
// Header and body of one request payload (the bytes after the size prefix).
Request decode_request(ByteView payload);

Bytes encode_response(const ApiVersionsResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const MetadataResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const ProduceResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const FetchResponse& resp, std::int16_t version, std::int32_t correlation_id);
Bytes encode_response(const ListOffsetsResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const FindCoordinatorResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const JoinGroupResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const SyncGroupResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const HeartbeatResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const LeaveGroupResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const OffsetCommitResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const OffsetFetchResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const ListGroupsResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const DescribeGroupsResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);
Bytes encode_response(const InitProducerIdResponse& resp, std::int16_t version,
                      std::int32_t correlation_id);

// ---- client side ------------------------------------------------------------------------------

Bytes encode_request(const ApiVersionsRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);
Bytes encode_request(const MetadataRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id);
Bytes encode_request(const ProduceRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id);
Bytes encode_request(const FetchRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id);
Bytes encode_request(const ListOffsetsRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);
Bytes encode_request(const FindCoordinatorRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);
Bytes encode_request(const JoinGroupRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id);
Bytes encode_request(const SyncGroupRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id);
Bytes encode_request(const HeartbeatRequest& req, std::int16_t version, std::int32_t correlation_id,
                     const std::optional<std::string>& client_id);
Bytes encode_request(const LeaveGroupRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);
Bytes encode_request(const OffsetCommitRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);
Bytes encode_request(const OffsetFetchRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);
Bytes encode_request(const ListGroupsRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);
Bytes encode_request(const DescribeGroupsRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);
Bytes encode_request(const InitProducerIdRequest& req, std::int16_t version,
                     std::int32_t correlation_id, const std::optional<std::string>& client_id);

template <class Body>
struct Response {
  std::int32_t correlation_id = 0;
  Body body;
};

// Decodes a response payload (after the size prefix) of the given version. Body is the response
// type of any api above (ApiVersionsResponse, MetadataResponse, ..., InitProducerIdResponse);
// the response header's version follows from the api and `version` (response_header_version()).
template <class Body>
Response<Body> decode_response(ByteView payload, std::int16_t version);

extern template Response<ApiVersionsResponse> decode_response(ByteView, std::int16_t);
extern template Response<MetadataResponse> decode_response(ByteView, std::int16_t);
extern template Response<ProduceResponse> decode_response(ByteView, std::int16_t);
extern template Response<FetchResponse> decode_response(ByteView, std::int16_t);
extern template Response<ListOffsetsResponse> decode_response(ByteView, std::int16_t);
extern template Response<FindCoordinatorResponse> decode_response(ByteView, std::int16_t);
extern template Response<JoinGroupResponse> decode_response(ByteView, std::int16_t);
extern template Response<SyncGroupResponse> decode_response(ByteView, std::int16_t);
extern template Response<HeartbeatResponse> decode_response(ByteView, std::int16_t);
extern template Response<LeaveGroupResponse> decode_response(ByteView, std::int16_t);
extern template Response<OffsetCommitResponse> decode_response(ByteView, std::int16_t);
extern template Response<OffsetFetchResponse> decode_response(ByteView, std::int16_t);
extern template Response<ListGroupsResponse> decode_response(ByteView, std::int16_t);
extern template Response<DescribeGroupsResponse> decode_response(ByteView, std::int16_t);
extern template Response<InitProducerIdResponse> decode_response(ByteView, std::int16_t);

}  // namespace purgatory::broker
