#include "protocol/offset_commit.hpp"

namespace purgatory::broker {

namespace {

constexpr std::size_t kTopicBytes = kMinStringBytes + kMinArrayBytes;  // name, partitions
constexpr std::size_t partition_bytes(std::int16_t v) {
  // partition_index, committed_offset, [leader epoch], [timestamp], metadata (null: 2 bytes)
  return 4 + 8 + (v >= 6 ? 4 : 0) + (v == 1 ? 8 : 0) + kMinStringBytes;
}
constexpr std::size_t kPartitionResponseBytes = 4 + 2;

}  // namespace

void write_body(Writer& w, const OffsetCommitRequest& req, std::int16_t version) {
  w.write_string(req.group_id);
  if (version >= 1) {
    w.write_int32(req.generation_id);
    w.write_string(req.member_id);
  }
  if (version >= 2 && version <= 4) w.write_int64(req.retention_time_ms);
  write_array(w, req.topics, [version](Writer& out, const OffsetCommitTopic& t) {
    out.write_string(t.name);
    write_array(out, t.partitions, [version](Writer& o, const OffsetCommitPartition& p) {
      o.write_int32(p.partition_index);
      o.write_int64(p.committed_offset);
      if (version >= 6) o.write_int32(p.committed_leader_epoch);
      if (version == 1) o.write_int64(p.commit_timestamp);
      o.write_nullable_string(p.committed_metadata);
    });
  });
}

OffsetCommitRequest read_offset_commit_request(Reader& r, std::int16_t version) {
  OffsetCommitRequest req;
  req.group_id = r.read_string("offset_commit.group_id");
  if (version >= 1) {
    req.generation_id = r.read_int32("offset_commit.generation_id");
    req.member_id = r.read_string("offset_commit.member_id");
  }
  if (version >= 2 && version <= 4) {
    req.retention_time_ms = r.read_int64("offset_commit.retention_time_ms");
  }
  req.topics = read_array(r, "offset_commit.topics", kTopicBytes, [version](Reader& in) {
    OffsetCommitTopic t;
    t.name = in.read_string("offset_commit.topics[].name");
    t.partitions = read_array(
        in, "offset_commit.topics[].partitions", partition_bytes(version), [version](Reader& i2) {
          OffsetCommitPartition p;
          p.partition_index = i2.read_int32("offset_commit.topics[].partitions[].partition_index");
          p.committed_offset =
              i2.read_int64("offset_commit.topics[].partitions[].committed_offset");
          if (version >= 6) {
            p.committed_leader_epoch =
                i2.read_int32("offset_commit.topics[].partitions[].committed_leader_epoch");
          }
          if (version == 1) {
            p.commit_timestamp =
                i2.read_int64("offset_commit.topics[].partitions[].commit_timestamp");
          }
          p.committed_metadata =
              i2.read_nullable_string("offset_commit.topics[].partitions[].committed_metadata");
          return p;
        });
    return t;
  });
  return req;
}

void write_body(Writer& w, const OffsetCommitResponse& resp, std::int16_t version) {
  if (version >= 3) w.write_int32(resp.throttle_time_ms);
  write_array(w, resp.topics, [](Writer& out, const OffsetCommitTopicResponse& t) {
    out.write_string(t.name);
    write_array(out, t.partitions, [](Writer& o, const OffsetCommitPartitionResponse& p) {
      o.write_int32(p.partition_index);
      o.write_int16(static_cast<std::int16_t>(p.error_code));
    });
  });
}

OffsetCommitResponse read_offset_commit_response(Reader& r, std::int16_t version) {
  OffsetCommitResponse resp;
  if (version >= 3) resp.throttle_time_ms = r.read_int32("offset_commit.throttle_time_ms");
  resp.topics = read_array(r, "offset_commit.topics", kTopicBytes, [](Reader& in) {
    OffsetCommitTopicResponse t;
    t.name = in.read_string("offset_commit.topics[].name");
    t.partitions = read_array(
        in, "offset_commit.topics[].partitions", kPartitionResponseBytes, [](Reader& i2) {
          OffsetCommitPartitionResponse p;
          p.partition_index = i2.read_int32("offset_commit.topics[].partitions[].partition_index");
          p.error_code =
              static_cast<Errc>(i2.read_int16("offset_commit.topics[].partitions[].error_code"));
          return p;
        });
    return t;
  });
  return resp;
}

}  // namespace purgatory::broker
