#include "protocol/init_producer_id.hpp"

#include <stdexcept>

namespace purgatory::broker {

namespace {

constexpr bool flexible(std::int16_t version) {
  return version >= 2;
}

}  // namespace

void write_body(Writer& w, const InitProducerIdRequest& req, std::int16_t version) {
  if (flexible(version)) {
    w.write_compact_nullable_string(req.transactional_id);
  } else {
    w.write_nullable_string(req.transactional_id);
  }
  w.write_int32(req.transaction_timeout_ms);
  if (version >= 3) {
    w.write_int64(req.producer_id);
    w.write_int16(req.producer_epoch);
  } else if (req.producer_id != -1 || req.producer_epoch != -1) {
    throw std::invalid_argument("InitProducerId below v3 cannot carry a producer id or epoch");
  }
  if (flexible(version)) w.write_empty_tagged_fields();
}

InitProducerIdRequest read_init_producer_id_request(Reader& r, std::int16_t version) {
  InitProducerIdRequest req;
  req.transactional_id = flexible(version)
                             ? r.read_compact_nullable_string("init_producer_id.transactional_id")
                             : r.read_nullable_string("init_producer_id.transactional_id");
  req.transaction_timeout_ms = r.read_int32("init_producer_id.transaction_timeout_ms");
  if (version >= 3) {
    req.producer_id = r.read_int64("init_producer_id.producer_id");
    req.producer_epoch = r.read_int16("init_producer_id.producer_epoch");
  }
  if (flexible(version)) r.skip_tagged_fields("init_producer_id.tagged_fields");
  return req;
}

void write_body(Writer& w, const InitProducerIdResponse& resp, std::int16_t version) {
  w.write_int32(resp.throttle_time_ms);
  w.write_int16(static_cast<std::int16_t>(resp.error_code));
  w.write_int64(resp.producer_id);
  w.write_int16(resp.producer_epoch);
  if (flexible(version)) w.write_empty_tagged_fields();
}

InitProducerIdResponse read_init_producer_id_response(Reader& r, std::int16_t version) {
  InitProducerIdResponse resp;
  resp.throttle_time_ms = r.read_int32("init_producer_id.throttle_time_ms");
  resp.error_code = static_cast<Errc>(r.read_int16("init_producer_id.error_code"));
  resp.producer_id = r.read_int64("init_producer_id.producer_id");
  resp.producer_epoch = r.read_int16("init_producer_id.producer_epoch");
  if (flexible(version)) r.skip_tagged_fields("init_producer_id.tagged_fields");
  return resp;
}

}  // namespace purgatory::broker
