#include "protocol/list_offsets.hpp"

namespace purgatory::broker {

namespace {

constexpr std::size_t kTopicBytes = kMinStringBytes + kMinArrayBytes;  // name, partitions
constexpr std::size_t kPartitionBytes = 4 + 8;
constexpr std::size_t kPartitionResponseBytes = 4 + 2 + 8 + 8;

}  // namespace

void write_body(Writer& w, const ListOffsetsRequest& req, std::int16_t /*version*/) {
  w.write_int32(req.replica_id);
  write_array(w, req.topics, [](Writer& out, const ListOffsetsTopic& t) {
    out.write_string(t.name);
    write_array(out, t.partitions, [](Writer& o, const ListOffsetsPartition& p) {
      o.write_int32(p.partition_index);
      o.write_int64(p.timestamp);
    });
  });
}

ListOffsetsRequest read_list_offsets_request(Reader& r, std::int16_t /*version*/) {
  ListOffsetsRequest req;
  req.replica_id = r.read_int32("list_offsets.replica_id");
  req.topics = read_array(r, "list_offsets.topics", kTopicBytes, [](Reader& in) {
    ListOffsetsTopic t;
    t.name = in.read_string("list_offsets.topics[].name");
    t.partitions =
        read_array(in, "list_offsets.topics[].partitions", kPartitionBytes, [](Reader& i2) {
          ListOffsetsPartition p;
          p.partition_index = i2.read_int32("list_offsets.topics[].partitions[].partition_index");
          p.timestamp = i2.read_int64("list_offsets.topics[].partitions[].timestamp");
          return p;
        });
    return t;
  });
  return req;
}

void write_body(Writer& w, const ListOffsetsResponse& resp, std::int16_t /*version*/) {
  write_array(w, resp.topics, [](Writer& out, const ListOffsetsTopicResponse& t) {
    out.write_string(t.name);
    write_array(out, t.partitions, [](Writer& o, const ListOffsetsPartitionResponse& p) {
      o.write_int32(p.partition_index);
      o.write_int16(static_cast<std::int16_t>(p.error_code));
      o.write_int64(p.timestamp);
      o.write_int64(p.offset);
    });
  });
}

ListOffsetsResponse read_list_offsets_response(Reader& r, std::int16_t /*version*/) {
  ListOffsetsResponse resp;
  resp.topics = read_array(r, "list_offsets.topics", kTopicBytes, [](Reader& in) {
    ListOffsetsTopicResponse t;
    t.name = in.read_string("list_offsets.topics[].name");
    t.partitions =
        read_array(in, "list_offsets.topics[].partitions", kPartitionResponseBytes, [](Reader& i2) {
          ListOffsetsPartitionResponse p;
          p.partition_index = i2.read_int32("list_offsets.topics[].partitions[].partition_index");
          p.error_code =
              static_cast<Errc>(i2.read_int16("list_offsets.topics[].partitions[].error_code"));
          p.timestamp = i2.read_int64("list_offsets.topics[].partitions[].timestamp");
          p.offset = i2.read_int64("list_offsets.topics[].partitions[].offset");
          return p;
        });
    return t;
  });
  return resp;
}

}  // namespace purgatory::broker
