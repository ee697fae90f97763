// fuzz_request_decoder: arbitrary bytes as the payload of a request frame (the bytes after the
// size prefix), decoded the way the server does: read_request_header(), then
// decode_request_body() for whatever api and version the header names.
//
// Invariants, checked on every input:
//   1. Decoding returns a request or throws DecodeError of a kind a request decoder can raise
//      (never corrupt_records, bad_frame_size, unsupported_compression: records stay opaque and
//      the frame is already cut); any other exception, a crash, a leak or UB is a bug.
//   2. decode_request(payload) agrees with the two-step path: the same request, or the same kind.
//   3. Round trip: a decoded request re-encoded by the client's encode_request() at the same
//      version, correlation_id and client_id is a well-formed frame that decodes to an equal
//      request, and encoding that one again gives the same bytes. Every api the codec decodes
//      has an encoder, so this covers all of them.
//   4. The same bytes read as a whole frame (size prefix first) end in a request or DecodeError.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>

#include "fuzz_check.hpp"
#include "protocol/codec.hpp"
#include "protocol/errors.hpp"
#include "protocol/framing.hpp"
#include "protocol/header.hpp"
#include "protocol/wire.hpp"

namespace {

namespace broker = purgatory::broker;
using purgatory::fuzz::check;
using purgatory::fuzz::fail;
using Kind = broker::DecodeErrorKind;

bool request_decoder_may_throw(Kind kind) {
  switch (kind) {
    case Kind::truncated:
    case Kind::negative_length:
    case Kind::bad_count:
    case Kind::bad_varint:
    case Kind::trailing_bytes:
    case Kind::unsupported_api:
    case Kind::unsupported_version:
      return true;
    case Kind::bad_frame_size:
    case Kind::corrupt_records:
    case Kind::unsupported_compression:
      return false;
  }
  return false;  // not a DecodeErrorKind at all
}

void check_error(const broker::DecodeError& e, const char* path) {
  check(request_decoder_may_throw(e.kind()), "{}: unexpected DecodeError kind {} ({})", path,
        static_cast<int>(e.kind()), e.what());
  check(!broker::to_string(e.kind()).empty(), "{}: kind {} has no name", path,
        static_cast<int>(e.kind()));
  check(e.what()[0] != '\0', "{}: DecodeError with an empty message", path);
  (void)e.kafka_error();
}

broker::Bytes encode(const broker::Request& request) {
  const broker::RequestHeader& h = request.header;
  try {
    return std::visit(
        [&](const auto& body) {
          return broker::encode_request(body, h.api_version, h.correlation_id, h.client_id);
        },
        request.body);
  } catch (const std::exception& e) {
    fail("encode_request threw for a request the decoder accepted ({} v{}): {}",
         broker::api_key_name(h.api_key), h.api_version, e.what());
  }
}

broker::Request decode_frame(const broker::Bytes& frame, const char* what) {
  try {
    return broker::decode_request(
        broker::frame_payload(frame, broker::kDefaultMaxFrameBytes, broker::kMinRequestFrameBytes));
  } catch (const broker::DecodeError& e) {
    fail("{} does not decode: {}", what, e.what());
  }
}

void check_round_trip(const broker::Request& request) {
  const broker::Bytes frame = encode(request);
  const broker::Request again = decode_frame(frame, "re-encoded request");
  check(again.header == request.header, "round trip changed the header ({} v{})",
        broker::api_key_name(request.header.api_key), request.header.api_version);
  check(again.body == request.body, "round trip changed the body ({} v{})",
        broker::api_key_name(request.header.api_key), request.header.api_version);
  check(encode(again) == frame, "encoding the round-tripped request gives other bytes ({} v{})",
        broker::api_key_name(request.header.api_key), request.header.api_version);
}

// The server's path: header first (so it holds the correlation_id), then the body.
std::optional<broker::Request> decode_two_step(broker::ByteView payload,
                                               std::optional<Kind>& error) {
  broker::Reader r(payload);
  try {
    broker::RequestHeader header = broker::read_request_header(r);
    broker::RequestBody body = broker::decode_request_body(header, r);
    check(r.at_end(), "decode_request_body returned with {} bytes left", r.remaining());
    return broker::Request{std::move(header), std::move(body)};
  } catch (const broker::DecodeError& e) {
    check_error(e, "read_request_header + decode_request_body");
    error = e.kind();
    return std::nullopt;
  }
}

void check_whole_frame(broker::ByteView frame) {
  if (frame.size() >= 4) {
    try {
      (void)broker::decode_frame_size(frame.first<4>());
    } catch (const broker::DecodeError& e) {
      check(e.kind() == Kind::bad_frame_size, "decode_frame_size threw kind {}",
            broker::to_string(e.kind()));
    }
  }
  try {
    const broker::ByteView payload =
        broker::frame_payload(frame, broker::kDefaultMaxFrameBytes, broker::kMinRequestFrameBytes);
    (void)broker::decode_request(payload);
  } catch (const broker::DecodeError& e) {
    (void)e.kafka_error();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const broker::ByteView payload(data, size);

  std::optional<Kind> error;
  const std::optional<broker::Request> request = decode_two_step(payload, error);

  try {
    const broker::Request one_step = broker::decode_request(payload);
    check(request.has_value(), "decode_request accepted what the two-step path rejected ({})",
          broker::to_string(*error));
    check(one_step.header == request->header && one_step.body == request->body,
          "decode_request and the two-step path disagree");
  } catch (const broker::DecodeError& e) {
    check_error(e, "decode_request");
    check(!request.has_value(), "decode_request rejected what the two-step path accepted: {}",
          e.what());
    check(e.kind() == *error, "decode_request threw {}, the two-step path {}",
          broker::to_string(e.kind()), broker::to_string(*error));
  }

  if (request) check_round_trip(*request);
  check_whole_frame(payload);
  return 0;
}
