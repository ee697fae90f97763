#include "protocol/wire.hpp"

#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace purgatory::broker {

namespace {

std::uint64_t load_be(const std::uint8_t* p, int width) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v = (v << 8) | p[i];
  return v;
}

void store_be(Bytes& buf, std::uint64_t v, int width) {
  for (int i = width - 1; i >= 0; --i)
    buf.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

}  // namespace

// ---- Reader -------------------------------------------------------------------------------------

void Reader::fail(DecodeErrorKind kind, std::string_view field, std::string_view detail) const {
  throw DecodeError(kind, fmt::format("{}: {} (at byte {})", field, detail, pos_));
}

void Reader::need(std::size_t n, std::string_view field) const {
  if (n > remaining()) {
    fail(DecodeErrorKind::truncated, field,
         fmt::format("needs {} bytes, {} remain", n, remaining()));
  }
}

std::int8_t Reader::read_int8(std::string_view field) {
  need(1, field);
  return static_cast<std::int8_t>(data_[pos_++]);
}

std::int16_t Reader::read_int16(std::string_view field) {
  need(2, field);
  const auto v = static_cast<std::uint16_t>(load_be(data_.data() + pos_, 2));
  pos_ += 2;
  return static_cast<std::int16_t>(v);
}

std::int32_t Reader::read_int32(std::string_view field) {
  return static_cast<std::int32_t>(read_uint32(field));
}

std::uint32_t Reader::read_uint32(std::string_view field) {
  need(4, field);
  const auto v = static_cast<std::uint32_t>(load_be(data_.data() + pos_, 4));
  pos_ += 4;
  return v;
}

std::int64_t Reader::read_int64(std::string_view field) {
  need(8, field);
  const std::uint64_t v = load_be(data_.data() + pos_, 8);
  pos_ += 8;
  return static_cast<std::int64_t>(v);
}

bool Reader::read_bool(std::string_view field) {
  return read_int8(field) != 0;
}

ByteView Reader::read_raw(std::size_t n, std::string_view field) {
  need(n, field);
  ByteView out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
}

std::size_t Reader::checked_length(std::int64_t length, std::string_view field) const {
  if (length < 0) {
    fail(DecodeErrorKind::negative_length, field, fmt::format("length {} is negative", length));
  }
  const auto n = static_cast<std::uint64_t>(length);
  if (n > remaining()) {
    fail(DecodeErrorKind::truncated, field,
         fmt::format("length {} exceeds the {} bytes remaining", length, remaining()));
  }
  return static_cast<std::size_t>(n);
}

std::size_t Reader::checked_count(std::int64_t count, std::string_view field,
                                  std::size_t min_element_bytes) const {
  if (count < 0) {
    fail(DecodeErrorKind::negative_length, field, fmt::format("array count {} is negative", count));
  }
  // Each element occupies at least min_element_bytes, so a count the rest of the frame cannot
  // hold is rejected here, before anyone reserves memory for it. Divide rather than multiply so a
  // huge count cannot overflow.
  const std::size_t min_bytes = min_element_bytes == 0 ? 1 : min_element_bytes;
  const auto n = static_cast<std::uint64_t>(count);
  if (n > remaining() / min_bytes) {
    fail(DecodeErrorKind::bad_count, field,
         fmt::format("array count {} needs at least {} bytes, {} remain", count, n * min_bytes,
                     remaining()));
  }
  return static_cast<std::size_t>(n);
}

std::string Reader::read_string(std::string_view field) {
  const std::int16_t len = read_int16(field);
  const std::size_t n = checked_length(len, field);
  ByteView b = read_raw(n, field);
  return {b.begin(), b.end()};
}

std::optional<std::string> Reader::read_nullable_string(std::string_view field) {
  need(2, field);
  if (load_be(data_.data() + pos_, 2) == 0xFFFF) {
    pos_ += 2;
    return std::nullopt;
  }
  return read_string(field);
}

std::optional<Bytes> Reader::read_nullable_bytes(std::string_view field) {
  const std::int32_t len = read_int32(field);
  if (len == -1) return std::nullopt;
  const std::size_t n = checked_length(len, field);
  ByteView b = read_raw(n, field);
  return Bytes(b.begin(), b.end());
}

Bytes Reader::read_bytes(std::string_view field) {
  const std::size_t at = pos_;
  std::optional<Bytes> b = read_nullable_bytes(field);
  if (!b) {
    pos_ = at;
    fail(DecodeErrorKind::negative_length, field, "null where bytes are required");
  }
  return std::move(*b);
}

std::size_t Reader::read_array_count(std::string_view field, std::size_t min_element_bytes) {
  return checked_count(read_int32(field), field, min_element_bytes);
}

std::optional<std::size_t> Reader::read_nullable_array_count(std::string_view field,
                                                             std::size_t min_element_bytes) {
  const std::int32_t count = read_int32(field);
  if (count == -1) return std::nullopt;
  return checked_count(count, field, min_element_bytes);
}

std::uint64_t Reader::read_uvarint_bits(std::string_view field, int max_bytes) {
  const std::size_t start = pos_;
  std::uint64_t v = 0;
  for (int i = 0; i < max_bytes; ++i) {
    need(1, field);
    const std::uint8_t b = data_[pos_++];
    v |= static_cast<std::uint64_t>(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) {
      // The last byte may carry only the bits the type has left (4 of a 32-bit value's 5th
      // byte, 1 of a 64-bit value's 10th): more would be silently dropped.
      const int used = 7 * i;
      const int width = max_bytes == 5 ? 32 : 64;
      if (width - used < 7 && (b >> (width - used)) != 0) break;
      return v;
    }
  }
  pos_ = start;
  fail(DecodeErrorKind::bad_varint, field,
       fmt::format("varint overflows {} bits", max_bytes == 5 ? 32 : 64));
}

std::uint32_t Reader::read_uvarint(std::string_view field) {
  return static_cast<std::uint32_t>(read_uvarint_bits(field, 5));
}

std::int32_t Reader::read_varint(std::string_view field) {
  const auto u = static_cast<std::uint32_t>(read_uvarint_bits(field, 5));
  return static_cast<std::int32_t>((u >> 1) ^ (~(u & 1) + 1));  // zigzag decode
}

std::int64_t Reader::read_varlong(std::string_view field) {
  const std::uint64_t u = read_uvarint_bits(field, 10);
  return static_cast<std::int64_t>((u >> 1) ^ (~(u & 1) + 1));
}

std::optional<std::string> Reader::read_compact_nullable_string(std::string_view field) {
  const std::uint32_t len_plus_one = read_uvarint(field);
  if (len_plus_one == 0) return std::nullopt;
  const std::size_t n = checked_length(std::int64_t{len_plus_one} - 1, field);
  ByteView b = read_raw(n, field);
  return std::string(b.begin(), b.end());
}

std::string Reader::read_compact_string(std::string_view field) {
  const std::size_t at = pos_;
  std::optional<std::string> s = read_compact_nullable_string(field);
  if (!s) {
    pos_ = at;
    fail(DecodeErrorKind::negative_length, field, "null where a string is required");
  }
  return std::move(*s);
}

std::size_t Reader::read_compact_array_count(std::string_view field,
                                             std::size_t min_element_bytes) {
  const std::uint32_t count_plus_one = read_uvarint(field);
  if (count_plus_one == 0) {
    fail(DecodeErrorKind::negative_length, field, "null where an array is required");
  }
  return checked_count(std::int64_t{count_plus_one} - 1, field, min_element_bytes);
}

void Reader::skip_tagged_fields(std::string_view field) {
  // A tagged field takes at least 2 bytes (tag, size 0).
  const std::size_t n = checked_count(read_uvarint(field), field, 2);
  for (std::size_t i = 0; i < n; ++i) {
    read_uvarint(field);  // tag
    const std::uint32_t size = read_uvarint(field);
    read_raw(checked_length(size, field), field);
  }
}

void Reader::expect_end(std::string_view what) const {
  if (!at_end()) {
    fail(DecodeErrorKind::trailing_bytes, what,
         fmt::format("{} bytes left after the last field", remaining()));
  }
}

std::vector<std::int32_t> read_int32_array(Reader& r, std::string_view field) {
  return read_array(r, field, 4, [field](Reader& in) { return in.read_int32(field); });
}

// ---- Writer -------------------------------------------------------------------------------------

void Writer::write_int16(std::int16_t v) {
  store_be(buf_, static_cast<std::uint16_t>(v), 2);
}
void Writer::write_int32(std::int32_t v) {
  store_be(buf_, static_cast<std::uint32_t>(v), 4);
}
void Writer::write_int64(std::int64_t v) {
  store_be(buf_, static_cast<std::uint64_t>(v), 8);
}
void Writer::write_uint32(std::uint32_t v) {
  store_be(buf_, v, 4);
}

void Writer::write_string(std::string_view s) {
  if (s.size() > static_cast<std::size_t>(std::numeric_limits<std::int16_t>::max())) {
    throw std::length_error(
        fmt::format("string of {} bytes exceeds the int16 length prefix", s.size()));
  }
  write_int16(static_cast<std::int16_t>(s.size()));
  buf_.insert(buf_.end(), s.begin(), s.end());
}

void Writer::write_nullable_string(const std::optional<std::string>& s) {
  if (!s) {
    write_int16(-1);
  } else {
    write_string(*s);
  }
}

void Writer::write_nullable_bytes(const std::optional<Bytes>& b) {
  if (!b) {
    write_int32(-1);
    return;
  }
  write_bytes(*b);
}

void Writer::write_bytes(ByteView b) {
  if (b.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::length_error(fmt::format("bytes of {} exceed the int32 length prefix", b.size()));
  }
  write_int32(static_cast<std::int32_t>(b.size()));
  write_raw(b);
}

void Writer::write_array_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::length_error(fmt::format("array of {} elements exceeds the int32 count", n));
  }
  write_int32(static_cast<std::int32_t>(n));
}

void Writer::write_uvarint(std::uint32_t v) {
  while (v >= 0x80) {
    buf_.push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  buf_.push_back(static_cast<std::uint8_t>(v));
}

void Writer::write_varint(std::int32_t v) {
  const auto u = static_cast<std::uint32_t>(v);
  write_uvarint((u << 1) ^ (v < 0 ? 0xFFFFFFFFU : 0U));  // zigzag encode
}

void Writer::write_varlong(std::int64_t v) {
  auto u = static_cast<std::uint64_t>(v);
  u = (u << 1) ^ (v < 0 ? ~std::uint64_t{0} : 0U);
  while (u >= 0x80) {
    buf_.push_back(static_cast<std::uint8_t>(u | 0x80));
    u >>= 7;
  }
  buf_.push_back(static_cast<std::uint8_t>(u));
}

void Writer::write_compact_string(std::string_view s) {
  if (s.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("compact string too long");
  }
  write_uvarint(static_cast<std::uint32_t>(s.size() + 1));
  buf_.insert(buf_.end(), s.begin(), s.end());
}

void Writer::write_compact_nullable_string(const std::optional<std::string>& s) {
  if (!s) {
    write_uvarint(0);
    return;
  }
  write_compact_string(*s);
}

void Writer::write_compact_array_count(std::size_t n) {
  if (n >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::length_error(fmt::format("compact array of {} elements is too long", n));
  }
  write_uvarint(static_cast<std::uint32_t>(n + 1));
}

void Writer::patch_int32(std::size_t offset, std::int32_t v) {
  if (offset + 4 > buf_.size()) throw std::out_of_range("patch_int32 past the end of the buffer");
  const auto u = static_cast<std::uint32_t>(v);
  for (int i = 0; i < 4; ++i)
    buf_[offset + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(u >> (24 - 8 * i));
}

void write_int32_array(Writer& w, const std::vector<std::int32_t>& items) {
  write_array(w, items, [](Writer& out, std::int32_t v) { out.write_int32(v); });
}

}  // namespace purgatory::broker
