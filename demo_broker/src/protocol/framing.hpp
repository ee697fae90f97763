// Kafka framing: every request and response is an int32 big-endian size followed by that many
// bytes. The size arrives before anything else, so it is checked before a buffer is allocated: a
// hostile 4-byte prefix must not make the broker reserve 2 GiB.
#pragma once

#include <cstdint>
#include <span>

#include "protocol/wire.hpp"

namespace purgatory::broker {

// Kafka's socket.request.max.bytes default (100 MiB).
inline constexpr std::int32_t kDefaultMaxFrameBytes = 100 * 1024 * 1024;
// Smallest request: header v1 with a null client_id (api_key, api_version, correlation_id, -1).
inline constexpr std::int32_t kMinRequestFrameBytes = 2 + 2 + 4 + 2;
// Smallest response: header v0 (correlation_id) and an empty body.
inline constexpr std::int32_t kMinResponseFrameBytes = 4;

// Size of the payload announced by `prefix`. Throws DecodeError(bad_frame_size) naming the value
// when it is negative, below `min_bytes`, or above `max_bytes`.
std::int32_t decode_frame_size(std::span<const std::uint8_t, 4> prefix,
                               std::int32_t max_bytes = kDefaultMaxFrameBytes,
                               std::int32_t min_bytes = kMinRequestFrameBytes);

// The payload of a complete frame (prefix + payload) held in memory: checks that the prefix
// announces exactly the bytes that follow. Throws DecodeError(truncated / trailing_bytes /
// bad_frame_size). For clients and tests that read whole frames.
ByteView frame_payload(ByteView frame, std::int32_t max_bytes = kDefaultMaxFrameBytes,
                       std::int32_t min_bytes = kMinResponseFrameBytes);

// Starts a frame: a Writer holding a 4-byte placeholder for the size.
Writer begin_frame();
// Patches the size prefix written by begin_frame() and returns the finished frame. Throws
// std::length_error if the payload does not fit an int32.
Bytes finish_frame(Writer&& w);

}  // namespace purgatory::broker
