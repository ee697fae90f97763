// Wire primitives of the Kafka protocol: a bounds-checked Reader over untrusted bytes and a
// Writer that appends to a growing buffer. Everything is big-endian; "compact" and varint forms
// are the flexible-version encodings of KIP-482 and the record format.
//
// The Reader is the broker's only defence against hostile input, so it checks before it touches:
// every fixed-width read checks the bytes remaining, every string/bytes length is checked against
// the bytes remaining before anything is allocated, and every array count is checked against what
// the remaining bytes could possibly hold (count * smallest encoded element) before a vector is
// reserved. Every failure throws DecodeError naming the field, the value and the byte position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/errors.hpp"

namespace purgatory::broker {

using Bytes = std::vector<std::uint8_t>;
using ByteView = std::span<const std::uint8_t>;

// Smallest encoding of the primitives, for the `min_element_bytes` of array counts.
inline constexpr std::size_t kMinStringBytes = 2;  // int16 length, empty string
inline constexpr std::size_t kMinBytesBytes = 4;   // int32 length, empty bytes
inline constexpr std::size_t kMinArrayBytes = 4;   // int32 count, empty array

// Reads fields front to back from a view it does not own; the bytes must outlive the Reader and
// the views it returns. Thread-compatible.
class Reader {
 public:
  explicit Reader(ByteView data) noexcept : data_(data) {}

  [[nodiscard]] std::size_t position() const noexcept { return pos_; }
  [[nodiscard]] std::size_t remaining() const noexcept { return data_.size() - pos_; }
  [[nodiscard]] bool at_end() const noexcept { return pos_ == data_.size(); }

  std::int8_t read_int8(std::string_view field);
  std::int16_t read_int16(std::string_view field);
  std::int32_t read_int32(std::string_view field);
  std::int64_t read_int64(std::string_view field);
  std::uint32_t read_uint32(std::string_view field);
  bool read_bool(std::string_view field);  // any non-zero byte is true, as in Kafka

  // `n` raw bytes as a view into the input.
  ByteView read_raw(std::size_t n, std::string_view field);

  // int16 length + UTF-8 bytes (not validated as UTF-8: Kafka does not either on these paths).
  std::string read_string(std::string_view field);
  std::optional<std::string> read_nullable_string(std::string_view field);
  // int32 length + bytes; -1 is null.
  std::optional<Bytes> read_nullable_bytes(std::string_view field);
  // As read_nullable_bytes, but null (-1) is refused: negative_length.
  Bytes read_bytes(std::string_view field);

  // int32 count; each element takes at least `min_element_bytes` (>= 1) on the wire.
  std::size_t read_array_count(std::string_view field, std::size_t min_element_bytes);
  // As read_array_count, but -1 is null.
  std::optional<std::size_t> read_nullable_array_count(std::string_view field,
                                                       std::size_t min_element_bytes);

  // Varints: unsigned (LEB128, at most 5 bytes) and zigzag-signed (record format).
  std::uint32_t read_uvarint(std::string_view field);
  std::int32_t read_varint(std::string_view field);
  std::int64_t read_varlong(std::string_view field);

  // Compact forms (flexible versions): uvarint length+1, 0 is null.
  std::string read_compact_string(std::string_view field);
  std::optional<std::string> read_compact_nullable_string(std::string_view field);
  std::size_t read_compact_array_count(std::string_view field, std::size_t min_element_bytes);
  // Tagged-field section: uvarint count of (uvarint tag, uvarint size, bytes). This codec knows no
  // tags, so all are skipped, as Kafka skips tags it does not know.
  void skip_tagged_fields(std::string_view field);

  // Throws trailing_bytes if anything is left; `what` names the message ("Metadata v4 request").
  void expect_end(std::string_view what) const;

  // Throws DecodeError(kind, "<field>: <detail> (at byte <position>)").
  [[noreturn]] void fail(DecodeErrorKind kind, std::string_view field,
                         std::string_view detail) const;

 private:
  void need(std::size_t n, std::string_view field) const;
  std::uint64_t read_uvarint_bits(std::string_view field, int max_bytes);
  std::size_t checked_count(std::int64_t count, std::string_view field,
                            std::size_t min_element_bytes) const;
  std::size_t checked_length(std::int64_t length, std::string_view field) const;

  ByteView data_;
  std::size_t pos_ = 0;
};

// Appends fields to an owned buffer. Encoders throw std::length_error when a value does not fit
// its length prefix (a string over 32767 bytes, a blob over 2 GiB). Thread-compatible.
class Writer {
 public:
  void write_int8(std::int8_t v) { buf_.push_back(static_cast<std::uint8_t>(v)); }
  void write_int16(std::int16_t v);
  void write_int32(std::int32_t v);
  void write_int64(std::int64_t v);
  void write_uint32(std::uint32_t v);
  void write_bool(bool v) { buf_.push_back(v ? 1 : 0); }
  void write_raw(ByteView bytes) { buf_.insert(buf_.end(), bytes.begin(), bytes.end()); }

  void write_string(std::string_view s);
  void write_nullable_string(const std::optional<std::string>& s);
  void write_nullable_bytes(const std::optional<Bytes>& b);
  void write_bytes(ByteView b);
  void write_array_count(std::size_t n);
  void write_null_array() { write_int32(-1); }

  void write_uvarint(std::uint32_t v);
  void write_varint(std::int32_t v);
  void write_varlong(std::int64_t v);
  void write_compact_string(std::string_view s);
  void write_compact_nullable_string(const std::optional<std::string>& s);  // null: length 0
  void write_compact_array_count(std::size_t n);
  void write_empty_tagged_fields() { write_uvarint(0); }

  // Overwrites 4 bytes at `offset` (which must already be written): for size prefixes known only
  // after the body is written.
  void patch_int32(std::size_t offset, std::int32_t v);

  [[nodiscard]] std::size_t size() const noexcept { return buf_.size(); }
  [[nodiscard]] const Bytes& bytes() const noexcept { return buf_; }
  [[nodiscard]] Bytes take() && noexcept { return std::move(buf_); }

 private:
  Bytes buf_;
};

// Reads an int32-counted array, calling `read_one(reader)` per element.
template <class ReadOne>
auto read_array(Reader& r, std::string_view field, std::size_t min_element_bytes,
                ReadOne&& read_one) {
  const std::size_t n = r.read_array_count(field, min_element_bytes);
  std::vector<decltype(read_one(r))> out;
  out.reserve(n);  // safe: n * min_element_bytes <= remaining bytes
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(read_one(r));
  return out;
}

template <class T, class WriteOne>
void write_array(Writer& w, const std::vector<T>& items, WriteOne&& write_one) {
  w.write_array_count(items.size());
  for (const T& item : items)
    write_one(w, item);
}

// Convenience for int32 arrays (replica lists and the like).
std::vector<std::int32_t> read_int32_array(Reader& r, std::string_view field);
void write_int32_array(Writer& w, const std::vector<std::int32_t>& items);

}  // namespace purgatory::broker
