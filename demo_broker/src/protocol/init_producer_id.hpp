// InitProducerId (key 22), versions 0..5: how a producer gets the producer id and epoch it stamps
// on its record batches, so the broker can tell a retry from new data (KIP-98's idempotent
// producer). Every modern client's producer sends it first: the Java producer since Kafka 3.0,
// librdkafka with enable.idempotence=true, kafka-ts always.
//
// Request: transactional_id (nullable string; null for an idempotent, non-transactional
// producer), transaction_timeout_ms, and from v3 producer_id and producer_epoch (the producer's
// current ones, -1 for none: a producer asking to continue after an epoch error). Response:
// throttle_time_ms, error_code, producer_id, producer_epoch. v1 is v0 again; v2 is the first
// flexible version (compact string, tagged fields, request header v2 and response header v1); v3
// adds the request's producer_id and producer_epoch; v4 and v5 only add error codes a client may
// receive (PRODUCER_FENCED, TRANSACTION_ABORTABLE), so their bodies are v3's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/errors.hpp"
#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safety: every struct here is a plain value type, thread-compatible.
struct InitProducerIdRequest {
  std::optional<std::string> transactional_id;  // null: idempotent, not transactional
  std::int32_t transaction_timeout_ms = 0;
  std::int64_t producer_id = -1;     // v3+; -1 below
  std::int16_t producer_epoch = -1;  // v3+; -1 below

  bool operator==(const InitProducerIdRequest&) const = default;
};

struct InitProducerIdResponse {
  std::int32_t throttle_time_ms = 0;
  Errc error_code = Errc::none;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;

  bool operator==(const InitProducerIdResponse&) const = default;
};

// Bodies only. Precondition: `version` is within codec_versions(). write_body throws
// std::invalid_argument for a request below v3 carrying a producer id or epoch other than -1 (the
// version has no field for them).
void write_body(Writer& w, const InitProducerIdRequest& req, std::int16_t version);
InitProducerIdRequest read_init_producer_id_request(Reader& r, std::int16_t version);
void write_body(Writer& w, const InitProducerIdResponse& resp, std::int16_t version);
InitProducerIdResponse read_init_producer_id_response(Reader& r, std::int16_t version);

}  // namespace purgatory::broker
