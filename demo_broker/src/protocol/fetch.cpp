#include "protocol/fetch.hpp"

namespace purgatory::broker {

namespace {

constexpr std::size_t kTopicBytes = kMinStringBytes + kMinArrayBytes;  // topic, partitions
constexpr std::size_t kPartitionBytes = 4 + 8 + 4;
constexpr std::size_t kAbortedBytes = 8 + 8;
// partition_index, error_code, high_watermark, last_stable_offset, aborted (null), records (null)
constexpr std::size_t kPartitionResponseBytes = 4 + 2 + 8 + 8 + kMinArrayBytes + kMinBytesBytes;

AbortedTransaction read_aborted(Reader& r) {
  AbortedTransaction a;
  a.producer_id = r.read_int64("fetch.responses[].partitions[].aborted_transactions[].producer_id");
  a.first_offset =
      r.read_int64("fetch.responses[].partitions[].aborted_transactions[].first_offset");
  return a;
}

FetchPartitionResponse read_partition_response(Reader& r) {
  FetchPartitionResponse p;
  p.partition_index = r.read_int32("fetch.responses[].partitions[].partition_index");
  p.error_code = static_cast<Errc>(r.read_int16("fetch.responses[].partitions[].error_code"));
  p.high_watermark = r.read_int64("fetch.responses[].partitions[].high_watermark");
  p.last_stable_offset = r.read_int64("fetch.responses[].partitions[].last_stable_offset");
  const std::optional<std::size_t> n = r.read_nullable_array_count(
      "fetch.responses[].partitions[].aborted_transactions", kAbortedBytes);
  if (n) {
    p.aborted_transactions.emplace();
    p.aborted_transactions->reserve(*n);
    for (std::size_t i = 0; i < *n; ++i)
      p.aborted_transactions->push_back(read_aborted(r));
  }
  p.records = r.read_nullable_bytes("fetch.responses[].partitions[].records");
  return p;
}

void write_partition_response(Writer& w, const FetchPartitionResponse& p) {
  w.write_int32(p.partition_index);
  w.write_int16(static_cast<std::int16_t>(p.error_code));
  w.write_int64(p.high_watermark);
  w.write_int64(p.last_stable_offset);
  if (!p.aborted_transactions) {
    w.write_null_array();
  } else {
    write_array(w, *p.aborted_transactions, [](Writer& out, const AbortedTransaction& a) {
      out.write_int64(a.producer_id);
      out.write_int64(a.first_offset);
    });
  }
  w.write_nullable_bytes(p.records);
}

}  // namespace

void write_body(Writer& w, const FetchRequest& req, std::int16_t /*version*/) {
  w.write_int32(req.replica_id);
  w.write_int32(req.max_wait_ms);
  w.write_int32(req.min_bytes);
  w.write_int32(req.max_bytes);
  w.write_int8(req.isolation_level);
  write_array(w, req.topics, [](Writer& out, const FetchTopic& t) {
    out.write_string(t.topic);
    write_array(out, t.partitions, [](Writer& o, const FetchPartition& p) {
      o.write_int32(p.partition);
      o.write_int64(p.fetch_offset);
      o.write_int32(p.partition_max_bytes);
    });
  });
}

FetchRequest read_fetch_request(Reader& r, std::int16_t /*version*/) {
  FetchRequest req;
  req.replica_id = r.read_int32("fetch.replica_id");
  req.max_wait_ms = r.read_int32("fetch.max_wait_ms");
  req.min_bytes = r.read_int32("fetch.min_bytes");
  req.max_bytes = r.read_int32("fetch.max_bytes");
  req.isolation_level = r.read_int8("fetch.isolation_level");
  req.topics = read_array(r, "fetch.topics", kTopicBytes, [](Reader& in) {
    FetchTopic t;
    t.topic = in.read_string("fetch.topics[].topic");
    t.partitions = read_array(in, "fetch.topics[].partitions", kPartitionBytes, [](Reader& i2) {
      FetchPartition p;
      p.partition = i2.read_int32("fetch.topics[].partitions[].partition");
      p.fetch_offset = i2.read_int64("fetch.topics[].partitions[].fetch_offset");
      p.partition_max_bytes = i2.read_int32("fetch.topics[].partitions[].partition_max_bytes");
      return p;
    });
    return t;
  });
  return req;
}

void write_body(Writer& w, const FetchResponse& resp, std::int16_t /*version*/) {
  w.write_int32(resp.throttle_time_ms);
  write_array(w, resp.responses, [](Writer& out, const FetchTopicResponse& t) {
    out.write_string(t.topic);
    write_array(out, t.partitions, write_partition_response);
  });
}

FetchResponse read_fetch_response(Reader& r, std::int16_t /*version*/) {
  FetchResponse resp;
  resp.throttle_time_ms = r.read_int32("fetch.throttle_time_ms");
  resp.responses = read_array(r, "fetch.responses", kTopicBytes, [](Reader& in) {
    FetchTopicResponse t;
    t.topic = in.read_string("fetch.responses[].topic");
    t.partitions = read_array(in, "fetch.responses[].partitions", kPartitionResponseBytes,
                              read_partition_response);
    return t;
  });
  return resp;
}

}  // namespace purgatory::broker
