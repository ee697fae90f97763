#include "protocol/metadata.hpp"

#include <stdexcept>

namespace purgatory::broker {

namespace {

// Smallest encodings, for the array-count checks.
constexpr std::size_t broker_bytes(std::int16_t v) {  // node_id, host, port, rack
  return 4 + kMinStringBytes + 4 + (v >= 1 ? kMinStringBytes : 0);
}
// error_code, name, is_internal (v1+), partitions, topic_authorized_operations (v8+)
constexpr std::size_t topic_bytes(std::int16_t v) {
  return 2 + kMinStringBytes + (v >= 1 ? 1 : 0) + kMinArrayBytes + (v >= 8 ? 4 : 0);
}
// error_code, partition_index, leader_id, leader_epoch (v7+), replicas, isr, offline (v5+)
constexpr std::size_t partition_bytes(std::int16_t v) {
  return 2 + 4 + 4 + (v >= 7 ? 4 : 0) + kMinArrayBytes + kMinArrayBytes +
         (v >= 5 ? kMinArrayBytes : 0);
}

MetadataPartition read_partition(Reader& r, std::int16_t version) {
  MetadataPartition p;
  p.error_code = static_cast<Errc>(r.read_int16("metadata.topics[].partitions[].error_code"));
  p.partition_index = r.read_int32("metadata.topics[].partitions[].partition_index");
  p.leader_id = r.read_int32("metadata.topics[].partitions[].leader_id");
  if (version >= 7) p.leader_epoch = r.read_int32("metadata.topics[].partitions[].leader_epoch");
  p.replica_nodes = read_int32_array(r, "metadata.topics[].partitions[].replica_nodes");
  p.isr_nodes = read_int32_array(r, "metadata.topics[].partitions[].isr_nodes");
  if (version >= 5) {
    p.offline_replicas = read_int32_array(r, "metadata.topics[].partitions[].offline_replicas");
  }
  return p;
}

void write_partition(Writer& w, const MetadataPartition& p, std::int16_t version) {
  w.write_int16(static_cast<std::int16_t>(p.error_code));
  w.write_int32(p.partition_index);
  w.write_int32(p.leader_id);
  if (version >= 7) w.write_int32(p.leader_epoch);
  write_int32_array(w, p.replica_nodes);
  write_int32_array(w, p.isr_nodes);
  if (version >= 5) write_int32_array(w, p.offline_replicas);
}

}  // namespace

void write_body(Writer& w, const MetadataRequest& req, std::int16_t version) {
  if (!req.topics) {
    if (version >= 1) {
      w.write_null_array();
    } else {
      w.write_array_count(0);  // v0: empty means all topics
    }
  } else {
    if (version == 0 && req.topics->empty()) {
      throw std::invalid_argument("Metadata v0 cannot request no topics: empty means all");
    }
    write_array(w, *req.topics, [](Writer& out, const std::string& t) { out.write_string(t); });
  }
  if (version >= 4) {
    w.write_bool(req.allow_auto_topic_creation);
  } else if (!req.allow_auto_topic_creation) {
    throw std::invalid_argument("Metadata below v4 cannot disable allow_auto_topic_creation");
  }
  if (version >= 8) {
    w.write_bool(req.include_cluster_authorized_operations);
    w.write_bool(req.include_topic_authorized_operations);
  } else if (req.include_cluster_authorized_operations || req.include_topic_authorized_operations) {
    throw std::invalid_argument("Metadata below v8 cannot ask for authorized operations");
  }
}

MetadataRequest read_metadata_request(Reader& r, std::int16_t version) {
  MetadataRequest req;
  const auto read_name = [](Reader& in) { return in.read_string("metadata.topics[]"); };
  if (version >= 1) {
    const std::optional<std::size_t> n =
        r.read_nullable_array_count("metadata.topics", kMinStringBytes);
    if (n) {
      req.topics.emplace();
      req.topics->reserve(*n);
      for (std::size_t i = 0; i < *n; ++i)
        req.topics->push_back(read_name(r));
    }
  } else {
    std::vector<std::string> topics = read_array(r, "metadata.topics", kMinStringBytes, read_name);
    if (!topics.empty()) req.topics = std::move(topics);
  }
  if (version >= 4) {
    req.allow_auto_topic_creation = r.read_bool("metadata.allow_auto_topic_creation");
  }
  if (version >= 8) {
    req.include_cluster_authorized_operations =
        r.read_bool("metadata.include_cluster_authorized_operations");
    req.include_topic_authorized_operations =
        r.read_bool("metadata.include_topic_authorized_operations");
  }
  return req;
}

void write_body(Writer& w, const MetadataResponse& resp, std::int16_t version) {
  if (version >= 3) w.write_int32(resp.throttle_time_ms);
  write_array(w, resp.brokers, [version](Writer& out, const MetadataBroker& b) {
    out.write_int32(b.node_id);
    out.write_string(b.host);
    out.write_int32(b.port);
    if (version >= 1) out.write_nullable_string(b.rack);
  });
  if (version >= 2) w.write_nullable_string(resp.cluster_id);
  if (version >= 1) w.write_int32(resp.controller_id);
  write_array(w, resp.topics, [version](Writer& out, const MetadataTopic& t) {
    out.write_int16(static_cast<std::int16_t>(t.error_code));
    out.write_string(t.name);
    if (version >= 1) out.write_bool(t.is_internal);
    write_array(out, t.partitions, [version](Writer& o, const MetadataPartition& p) {
      write_partition(o, p, version);
    });
    if (version >= 8) out.write_int32(t.topic_authorized_operations);
  });
  if (version >= 8) w.write_int32(resp.cluster_authorized_operations);
}

MetadataResponse read_metadata_response(Reader& r, std::int16_t version) {
  MetadataResponse resp;
  if (version >= 3) resp.throttle_time_ms = r.read_int32("metadata.throttle_time_ms");
  resp.brokers = read_array(r, "metadata.brokers", broker_bytes(version), [version](Reader& in) {
    MetadataBroker b;
    b.node_id = in.read_int32("metadata.brokers[].node_id");
    b.host = in.read_string("metadata.brokers[].host");
    b.port = in.read_int32("metadata.brokers[].port");
    if (version >= 1) b.rack = in.read_nullable_string("metadata.brokers[].rack");
    return b;
  });
  if (version >= 2) resp.cluster_id = r.read_nullable_string("metadata.cluster_id");
  if (version >= 1) resp.controller_id = r.read_int32("metadata.controller_id");
  resp.topics = read_array(r, "metadata.topics", topic_bytes(version), [version](Reader& in) {
    MetadataTopic t;
    t.error_code = static_cast<Errc>(in.read_int16("metadata.topics[].error_code"));
    t.name = in.read_string("metadata.topics[].name");
    if (version >= 1) t.is_internal = in.read_bool("metadata.topics[].is_internal");
    t.partitions = read_array(in, "metadata.topics[].partitions", partition_bytes(version),
                              [version](Reader& i2) { return read_partition(i2, version); });
    if (version >= 8) {
      t.topic_authorized_operations =
          in.read_int32("metadata.topics[].topic_authorized_operations");
    }
    return t;
  });
  if (version >= 8) {
    resp.cluster_authorized_operations = r.read_int32("metadata.cluster_authorized_operations");
  }
  return resp;
}

}  // namespace purgatory::broker
