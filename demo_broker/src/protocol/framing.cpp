#include "protocol/framing.hpp"

#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace purgatory::broker {

std::int32_t decode_frame_size(std::span<const std::uint8_t, 4> prefix, std::int32_t max_bytes,
                               std::int32_t min_bytes) {
  Reader r(prefix);
  const std::int32_t size = r.read_int32("frame size");
  if (size < 0) {
    throw DecodeError(DecodeErrorKind::bad_frame_size,
                      fmt::format("frame size: {} is negative", size));
  }
  if (size < min_bytes) {
    throw DecodeError(
        DecodeErrorKind::bad_frame_size,
        fmt::format("frame size: {} is below the minimum of {} bytes", size, min_bytes));
  }
  if (size > max_bytes) {
    throw DecodeError(
        DecodeErrorKind::bad_frame_size,
        fmt::format("frame size: {} exceeds the maximum of {} bytes", size, max_bytes));
  }
  return size;
}

ByteView frame_payload(ByteView frame, std::int32_t max_bytes, std::int32_t min_bytes) {
  if (frame.size() < 4) {
    throw DecodeError(DecodeErrorKind::truncated,
                      fmt::format("frame size: needs 4 bytes, {} present", frame.size()));
  }
  const std::int32_t size = decode_frame_size(frame.first<4>(), max_bytes, min_bytes);
  const ByteView payload = frame.subspan(4);
  const auto expected = static_cast<std::size_t>(size);
  if (payload.size() < expected) {
    throw DecodeError(
        DecodeErrorKind::truncated,
        fmt::format("frame: size prefix announces {} bytes, {} present", size, payload.size()));
  }
  if (payload.size() > expected) {
    throw DecodeError(
        DecodeErrorKind::trailing_bytes,
        fmt::format("frame: size prefix announces {} bytes, {} present", size, payload.size()));
  }
  return payload;
}

Writer begin_frame() {
  Writer w;
  w.write_int32(0);
  return w;
}

Bytes finish_frame(Writer&& w) {
  const std::size_t payload = w.size() - 4;
  if (payload > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::length_error(fmt::format("frame payload of {} bytes exceeds int32", payload));
  }
  w.patch_int32(0, static_cast<std::int32_t>(payload));
  return std::move(w).take();
}

}  // namespace purgatory::broker
