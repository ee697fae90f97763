// Helpers shared by the codec tests.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

#include "protocol/codec.hpp"
#include "protocol/errors.hpp"
#include "protocol/framing.hpp"
#include "protocol/wire.hpp"

// Failed byte comparisons print as hex.
namespace doctest {
template <>
struct StringMaker<std::vector<std::uint8_t>> {
  static String convert(const std::vector<std::uint8_t>& b) {
    static constexpr char kHex[] = "0123456789abcdef";
    // Appended piece by piece: g++ 12 at -O3 misreports `"[" + std::string` (-Wrestrict).
    std::string out;
    out.reserve(16 + 3 * b.size());
    out += '[';
    out += std::to_string(b.size());
    out += ']';
    for (std::uint8_t c : b) {
      out += ' ';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
    return String(out.c_str());
  }
};
}  // namespace doctest

namespace purgatory::broker::test {

// Bytes from a list of small integers, so golden frames read like a hex dump.
inline Bytes bytes(std::initializer_list<int> values) {
  Bytes out;
  for (int v : values)
    out.push_back(static_cast<std::uint8_t>(v));
  return out;
}

inline Bytes bytes_of(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

inline Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts)
    out.insert(out.end(), p.begin(), p.end());
  return out;
}

// `payload` with its int32 size prefix.
inline Bytes frame(const Bytes& payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  Bytes out;
  out.reserve(4 + payload.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<std::uint8_t>(n >> shift));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

// The payload of an encoded frame, as a fresh exactly-sized heap copy (so ASan sees any read
// past its end).
inline Bytes payload_of(const Bytes& frame) {
  const ByteView p = frame_payload(frame, kDefaultMaxFrameBytes, kMinResponseFrameBytes);
  return Bytes(p.begin(), p.end());
}

// The kind of the DecodeError `f` throws; fails the test if it throws nothing or something else.
template <class F>
std::optional<DecodeErrorKind> decode_error_kind(F&& f) {
  try {
    f();
  } catch (const DecodeError& e) {
    return e.kind();
  }
  return std::nullopt;
}

// The what() of the DecodeError `f` throws, or "" when it throws none.
template <class F>
std::string decode_error_message(F&& f) {
  try {
    f();
  } catch (const DecodeError& e) {
    return e.what();
  }
  return {};
}

// Encodes `req` (client side), decodes it (server side) and returns the decoded body, checking
// the header came through.
template <class Req>
Req request_round_trip(const Req& req, std::int16_t version) {
  const Bytes frame = encode_request(req, version, 0x01020304, std::string("test-client"));
  const Bytes payload = payload_of(frame);
  const Request decoded = decode_request(payload);
  CHECK(decoded.header.api_version == version);
  CHECK(decoded.header.correlation_id == 0x01020304);
  CHECK(decoded.header.client_id == std::optional<std::string>("test-client"));
  REQUIRE(std::holds_alternative<Req>(decoded.body));
  return std::get<Req>(decoded.body);
}

// Encodes `resp` (server side), decodes it (client side) and returns the decoded body.
template <class Resp>
Resp response_round_trip(const Resp& resp, std::int16_t version) {
  const Bytes frame = encode_response(resp, version, -7);
  const Bytes payload = payload_of(frame);
  const Response<Resp> decoded = decode_response<Resp>(payload, version);
  CHECK(decoded.correlation_id == -7);
  return decoded.body;
}

}  // namespace purgatory::broker::test
