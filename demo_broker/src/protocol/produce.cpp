#include "protocol/produce.hpp"

namespace purgatory::broker {

namespace {

constexpr std::size_t kTopicBytes = kMinStringBytes + kMinArrayBytes;  // name, partitions
constexpr std::size_t kPartitionDataBytes = 4 + kMinBytesBytes;        // index, records
constexpr std::size_t kPartitionResponseBytes = 4 + 2 + 8 + 8;         // v2+ layout

}  // namespace

void write_body(Writer& w, const ProduceRequest& req, std::int16_t /*version*/) {
  w.write_nullable_string(req.transactional_id);
  w.write_int16(req.acks);
  w.write_int32(req.timeout_ms);
  write_array(w, req.topics, [](Writer& out, const ProduceTopicData& t) {
    out.write_string(t.name);
    write_array(out, t.partitions, [](Writer& o, const ProducePartitionData& p) {
      o.write_int32(p.index);
      o.write_nullable_bytes(p.records);
    });
  });
}

ProduceRequest read_produce_request(Reader& r, std::int16_t /*version*/) {
  ProduceRequest req;
  req.transactional_id = r.read_nullable_string("produce.transactional_id");
  req.acks = r.read_int16("produce.acks");
  req.timeout_ms = r.read_int32("produce.timeout_ms");
  req.topics = read_array(r, "produce.topics", kTopicBytes, [](Reader& in) {
    ProduceTopicData t;
    t.name = in.read_string("produce.topics[].name");
    t.partitions =
        read_array(in, "produce.topics[].partitions", kPartitionDataBytes, [](Reader& i2) {
          ProducePartitionData p;
          p.index = i2.read_int32("produce.topics[].partitions[].index");
          p.records = i2.read_nullable_bytes("produce.topics[].partitions[].records");
          return p;
        });
    return t;
  });
  return req;
}

void write_body(Writer& w, const ProduceResponse& resp, std::int16_t /*version*/) {
  write_array(w, resp.responses, [](Writer& out, const ProduceTopicResponse& t) {
    out.write_string(t.name);
    write_array(out, t.partitions, [](Writer& o, const ProducePartitionResponse& p) {
      o.write_int32(p.index);
      o.write_int16(static_cast<std::int16_t>(p.error_code));
      o.write_int64(p.base_offset);
      o.write_int64(p.log_append_time_ms);
    });
  });
  w.write_int32(resp.throttle_time_ms);
}

ProduceResponse read_produce_response(Reader& r, std::int16_t /*version*/) {
  ProduceResponse resp;
  resp.responses = read_array(r, "produce.responses", kTopicBytes, [](Reader& in) {
    ProduceTopicResponse t;
    t.name = in.read_string("produce.responses[].name");
    t.partitions =
        read_array(in, "produce.responses[].partitions", kPartitionResponseBytes, [](Reader& i2) {
          ProducePartitionResponse p;
          p.index = i2.read_int32("produce.responses[].partitions[].index");
          p.error_code =
              static_cast<Errc>(i2.read_int16("produce.responses[].partitions[].error_code"));
          p.base_offset = i2.read_int64("produce.responses[].partitions[].base_offset");
          p.log_append_time_ms =
              i2.read_int64("produce.responses[].partitions[].log_append_time_ms");
          return p;
        });
    return t;
  });
  resp.throttle_time_ms = r.read_int32("produce.throttle_time_ms");
  return resp;
}

}  // namespace purgatory::broker
