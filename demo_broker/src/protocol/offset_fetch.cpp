#include "protocol/offset_fetch.hpp"

#include <stdexcept>

namespace purgatory::broker {

namespace {

constexpr std::size_t kTopicBytes = kMinStringBytes + kMinArrayBytes;  // name, partitions
constexpr std::size_t partition_response_bytes(std::int16_t v) {
  // partition_index, committed_offset, [leader epoch], metadata (null: 2 bytes), error_code
  return 4 + 8 + (v >= 5 ? 4 : 0) + kMinStringBytes + 2;
}

OffsetFetchTopic read_topic(Reader& r) {
  OffsetFetchTopic t;
  t.name = r.read_string("offset_fetch.topics[].name");
  t.partition_indexes = read_int32_array(r, "offset_fetch.topics[].partition_indexes");
  return t;
}

void write_topic(Writer& w, const OffsetFetchTopic& t) {
  w.write_string(t.name);
  write_int32_array(w, t.partition_indexes);
}

}  // namespace

void write_body(Writer& w, const OffsetFetchRequest& req, std::int16_t version) {
  w.write_string(req.group_id);
  if (req.topics) {
    write_array(w, *req.topics, write_topic);
  } else if (version >= 2) {
    w.write_null_array();
  } else {
    throw std::invalid_argument("OffsetFetch below v2 cannot ask for all topics (null)");
  }
}

OffsetFetchRequest read_offset_fetch_request(Reader& r, std::int16_t version) {
  OffsetFetchRequest req;
  req.group_id = r.read_string("offset_fetch.group_id");
  std::optional<std::size_t> n;
  if (version >= 2) {
    n = r.read_nullable_array_count("offset_fetch.topics", kTopicBytes);
  } else {
    n = r.read_array_count("offset_fetch.topics", kTopicBytes);
  }
  if (n) {
    req.topics.emplace();
    req.topics->reserve(*n);  // safe: n * kTopicBytes <= remaining bytes
    for (std::size_t i = 0; i < *n; ++i)
      req.topics->push_back(read_topic(r));
  }
  return req;
}

void write_body(Writer& w, const OffsetFetchResponse& resp, std::int16_t version) {
  if (version >= 3) w.write_int32(resp.throttle_time_ms);
  write_array(w, resp.topics, [version](Writer& out, const OffsetFetchTopicResponse& t) {
    out.write_string(t.name);
    write_array(out, t.partitions, [version](Writer& o, const OffsetFetchPartitionResponse& p) {
      o.write_int32(p.partition_index);
      o.write_int64(p.committed_offset);
      if (version >= 5) o.write_int32(p.committed_leader_epoch);
      o.write_nullable_string(p.metadata);
      o.write_int16(static_cast<std::int16_t>(p.error_code));
    });
  });
  if (version >= 2) w.write_int16(static_cast<std::int16_t>(resp.error_code));
}

OffsetFetchResponse read_offset_fetch_response(Reader& r, std::int16_t version) {
  OffsetFetchResponse resp;
  if (version >= 3) resp.throttle_time_ms = r.read_int32("offset_fetch.throttle_time_ms");
  resp.topics = read_array(r, "offset_fetch.topics", kTopicBytes, [version](Reader& in) {
    OffsetFetchTopicResponse t;
    t.name = in.read_string("offset_fetch.topics[].name");
    t.partitions = read_array(
        in, "offset_fetch.topics[].partitions", partition_response_bytes(version),
        [version](Reader& i2) {
          OffsetFetchPartitionResponse p;
          p.partition_index = i2.read_int32("offset_fetch.topics[].partitions[].partition_index");
          p.committed_offset = i2.read_int64("offset_fetch.topics[].partitions[].committed_offset");
          if (version >= 5) {
            p.committed_leader_epoch =
                i2.read_int32("offset_fetch.topics[].partitions[].committed_leader_epoch");
          }
          p.metadata = i2.read_nullable_string("offset_fetch.topics[].partitions[].metadata");
          p.error_code =
              static_cast<Errc>(i2.read_int16("offset_fetch.topics[].partitions[].error_code"));
          return p;
        });
    return t;
  });
  if (version >= 2) resp.error_code = static_cast<Errc>(r.read_int16("offset_fetch.error_code"));
  return resp;
}

}  // namespace purgatory::broker
