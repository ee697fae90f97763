// Errors of the Kafka codec: the Kafka error codes the demo broker answers with, and the one
// exception type every decoder throws.
//
// Error style for this layer: decoders throw DecodeError (bad bytes from the network, a
// DecodeErrorKind says which rule they broke); encoders throw std::invalid_argument or
// std::length_error (a caller asked for something the wire cannot carry). Nothing returns a
// half-decoded value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace purgatory::broker {

// Kafka's error codes (org.apache.kafka.common.protocol.Errors), the subset the demo uses. The
// enum has int16 underlying type, so a code received from a real broker that is not listed here
// still round-trips unchanged.
enum class Errc : std::int16_t {
  none = 0,
  offset_out_of_range = 1,
  corrupt_message = 2,
  unknown_topic_or_partition = 3,
  request_timed_out = 7,
  offset_metadata_too_large = 12,
  coordinator_not_available = 15,
  invalid_topic_exception = 17,
  invalid_required_acks = 21,
  illegal_generation = 22,
  inconsistent_group_protocol = 23,
  invalid_group_id = 24,
  unknown_member_id = 25,
  invalid_session_timeout = 26,
  rebalance_in_progress = 27,
  unsupported_version = 35,
  invalid_request = 42,
  out_of_order_sequence_number = 45,
  duplicate_sequence_number = 46,
  invalid_producer_epoch = 47,
  transactional_id_authorization_failed = 53,
  unknown_producer_id = 59,
  unsupported_compression_type = 76,
  member_id_required = 79,
  invalid_record = 87,
};

// Kafka's name for the code ("CORRUPT_MESSAGE"), or "UNKNOWN_SERVER_ERROR(<n>)"-style text for
// codes not listed above.
[[nodiscard]] std::string errc_name(Errc code);

// Which rule the input broke. The server closes the connection on most kinds; unsupported_api and
// unsupported_version leave the framing intact, so it can answer instead.
enum class DecodeErrorKind {
  truncated,                // the frame ends before a field (or a declared length) does
  negative_length,          // string/bytes/array length below -1, or -1 where null is not allowed
  bad_count,                // array count the remaining bytes cannot possibly hold
  bad_varint,               // varint longer than its type allows
  trailing_bytes,           // bytes left over after the message was fully decoded
  unsupported_api,          // api key this codec does not know
  unsupported_version,      // known api key, version outside what this codec decodes
  bad_frame_size,           // size prefix negative, too small or above the configured maximum
  corrupt_records,          // record batch failed a check (length, magic, CRC-32C)
  unsupported_compression,  // records are compressed; the client parser reads plain batches only
};

[[nodiscard]] std::string_view to_string(DecodeErrorKind kind) noexcept;

// Thrown by every decoder in purgatory::broker. what() names the field, the offending value and
// the byte position, e.g. "produce.topics: array count 1000000 needs at least 6000000 bytes, 14
// remain (at byte 20)". Thread-compatible (an immutable value).
class DecodeError : public std::runtime_error {
 public:
  DecodeError(DecodeErrorKind kind, const std::string& message);

  [[nodiscard]] DecodeErrorKind kind() const noexcept { return kind_; }

  // The Kafka error code a broker would report for this failure: CORRUPT_MESSAGE for bad records,
  // UNSUPPORTED_VERSION for unsupported api/version, UNSUPPORTED_COMPRESSION_TYPE, otherwise
  // INVALID_REQUEST.
  [[nodiscard]] Errc kafka_error() const noexcept;

 private:
  DecodeErrorKind kind_;
};

}  // namespace purgatory::broker
