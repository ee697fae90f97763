#include "protocol/errors.hpp"

#include <fmt/format.h>

namespace purgatory::broker {

std::string errc_name(Errc code) {
  switch (code) {
    case Errc::none:
      return "NONE";
    case Errc::offset_out_of_range:
      return "OFFSET_OUT_OF_RANGE";
    case Errc::corrupt_message:
      return "CORRUPT_MESSAGE";
    case Errc::unknown_topic_or_partition:
      return "UNKNOWN_TOPIC_OR_PARTITION";
    case Errc::request_timed_out:
      return "REQUEST_TIMED_OUT";
    case Errc::offset_metadata_too_large:
      return "OFFSET_METADATA_TOO_LARGE";
    case Errc::coordinator_not_available:
      return "COORDINATOR_NOT_AVAILABLE";
    case Errc::invalid_topic_exception:
      return "INVALID_TOPIC_EXCEPTION";
    case Errc::invalid_required_acks:
      return "INVALID_REQUIRED_ACKS";
    case Errc::illegal_generation:
      return "ILLEGAL_GENERATION";
    case Errc::inconsistent_group_protocol:
      return "INCONSISTENT_GROUP_PROTOCOL";
    case Errc::invalid_group_id:
      return "INVALID_GROUP_ID";
    case Errc::unknown_member_id:
      return "UNKNOWN_MEMBER_ID";
    case Errc::invalid_session_timeout:
      return "INVALID_SESSION_TIMEOUT";
    case Errc::rebalance_in_progress:
      return "REBALANCE_IN_PROGRESS";
    case Errc::unsupported_version:
      return "UNSUPPORTED_VERSION";
    case Errc::invalid_request:
      return "INVALID_REQUEST";
    case Errc::out_of_order_sequence_number:
      return "OUT_OF_ORDER_SEQUENCE_NUMBER";
    case Errc::duplicate_sequence_number:
      return "DUPLICATE_SEQUENCE_NUMBER";
    case Errc::invalid_producer_epoch:
      return "INVALID_PRODUCER_EPOCH";
    case Errc::transactional_id_authorization_failed:
      return "TRANSACTIONAL_ID_AUTHORIZATION_FAILED";
    case Errc::unknown_producer_id:
      return "UNKNOWN_PRODUCER_ID";
    case Errc::unsupported_compression_type:
      return "UNSUPPORTED_COMPRESSION_TYPE";
    case Errc::member_id_required:
      return "MEMBER_ID_REQUIRED";
    case Errc::invalid_record:
      return "INVALID_RECORD";
  }
  return fmt::format("ERROR_CODE({})", static_cast<int>(code));
}

std::string_view to_string(DecodeErrorKind kind) noexcept {
  switch (kind) {
    case DecodeErrorKind::truncated:
      return "truncated";
    case DecodeErrorKind::negative_length:
      return "negative_length";
    case DecodeErrorKind::bad_count:
      return "bad_count";
    case DecodeErrorKind::bad_varint:
      return "bad_varint";
    case DecodeErrorKind::trailing_bytes:
      return "trailing_bytes";
    case DecodeErrorKind::unsupported_api:
      return "unsupported_api";
    case DecodeErrorKind::unsupported_version:
      return "unsupported_version";
    case DecodeErrorKind::bad_frame_size:
      return "bad_frame_size";
    case DecodeErrorKind::corrupt_records:
      return "corrupt_records";
    case DecodeErrorKind::unsupported_compression:
      return "unsupported_compression";
  }
  return "unknown";
}

DecodeError::DecodeError(DecodeErrorKind kind, const std::string& message)
    : std::runtime_error(message), kind_(kind) {}

Errc DecodeError::kafka_error() const noexcept {
  switch (kind_) {
    case DecodeErrorKind::corrupt_records:
      return Errc::corrupt_message;
    case DecodeErrorKind::unsupported_api:
    case DecodeErrorKind::unsupported_version:
      return Errc::unsupported_version;
    case DecodeErrorKind::unsupported_compression:
      return Errc::unsupported_compression_type;
    default:
      return Errc::invalid_request;
  }
}

}  // namespace purgatory::broker
