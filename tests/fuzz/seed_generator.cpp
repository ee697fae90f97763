// Writes the seed corpus of fuzz_request_decoder and fuzz_record_batch: one valid request per
// api and version the codec speaks (built with the client's encoders, stored without the size
// prefix, as the decoder fuzzer reads them), a few near-misses, and record batches built with
// build_record_batch(). Run once by hand when the codec grows an api or version:
//   fuzz_seed_generator tests/fuzz/corpus
// It does not write fuzz_timer_purgatory_model seeds (those are hand-made scripts, see README).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/codec.hpp"
#include "protocol/consumer_protocol.hpp"
#include "protocol/records.hpp"

namespace {

namespace broker = purgatory::broker;
namespace fs = std::filesystem;

void write_file(const fs::path& path, broker::ByteView bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// A request seed is the frame minus its 4-byte size prefix.
void write_request(const fs::path& dir, const std::string& name, const broker::Bytes& frame) {
  write_file(dir / name, broker::ByteView(frame).subspan(4));
}

broker::Bytes small_batch(std::int64_t base_offset, int records) {
  std::vector<broker::ProducerRecord> rs;
  for (int i = 0; i < records; ++i) {
    rs.push_back(
        {i % 2 == 0 ? std::optional<std::string>("k" + std::to_string(i)) : std::nullopt,
         i % 3 == 2 ? std::nullopt : std::optional<std::string>("value-" + std::to_string(i))});
  }
  return broker::build_record_batch(rs, 1'700'000'000'000, base_offset);
}

// Every consumer-group api at every version the codec speaks, with the fields each version has.
void write_group_requests(const fs::path& dir, const std::optional<std::string>& client) {
  const auto name = [](const char* api, std::int16_t v, const char* suffix = "") {
    return std::string(api) + "_v" + std::to_string(v) + suffix;
  };
  const broker::Bytes subscription =
      broker::encode_subscription({0, {"orders", "payments"}, std::nullopt});
  const broker::Bytes assignment =
      broker::encode_assignment({0, {{"orders", {0, 1}}, {"payments", {2}}}, std::nullopt});
  for (std::int16_t v = 0; v <= 2; ++v) {
    write_request(
        dir, name("find_coordinator", v),
        broker::encode_request(broker::FindCoordinatorRequest{"orders-group"}, v, 20, client));
    broker::SyncGroupRequest sync{"orders-group", 3, "rdkafka-m1", {}};
    sync.assignments = {{"rdkafka-m1", assignment}, {"rdkafka-m2", {}}};
    write_request(dir, name("sync_group", v), broker::encode_request(sync, v, 21, client));
    write_request(dir, name("heartbeat", v),
                  broker::encode_request(broker::HeartbeatRequest{"orders-group", 3, "rdkafka-m1"},
                                         v, 22, client));
    write_request(dir, name("list_groups", v),
                  broker::encode_request(broker::ListGroupsRequest{}, v, 23, client));
    write_request(dir, name("describe_groups", v),
                  broker::encode_request(broker::DescribeGroupsRequest{{"orders-group", "other"}},
                                         v, 24, client));
  }
  for (std::int16_t v = 0; v <= 1; ++v) {
    write_request(dir, name("leave_group", v),
                  broker::encode_request(broker::LeaveGroupRequest{"orders-group", "rdkafka-m1"}, v,
                                         25, client));
  }
  for (std::int16_t v = 0; v <= 4; ++v) {
    broker::JoinGroupRequest join{
        "orders-group",       10000,
        v >= 1 ? 300000 : -1, v == 4 ? "rdkafka-m1" : "",
        "consumer",           {{"range", subscription}, {"roundrobin", subscription}}};
    write_request(dir, name("join_group", v), broker::encode_request(join, v, 26, client));
  }
  for (std::int16_t v = 0; v <= 6; ++v) {
    broker::OffsetCommitRequest commit;
    commit.group_id = "orders-group";
    if (v >= 1) {
      commit.generation_id = 3;
      commit.member_id = "rdkafka-m1";
    }
    if (v >= 2 && v <= 4) commit.retention_time_ms = 86400000;
    broker::OffsetCommitPartition p0{0, 42, v >= 6 ? 5 : -1, v == 1 ? 1'700'000'000'000 : -1,
                                     std::string("meta")};
    broker::OffsetCommitPartition p1{1, 7, -1, -1, std::nullopt};
    commit.topics = {{"orders", {p0, p1}}};
    write_request(dir, name("offset_commit", v), broker::encode_request(commit, v, 27, client));
  }
  for (std::int16_t v = 0; v <= 5; ++v) {
    broker::OffsetFetchRequest fetch{"orders-group", std::vector<broker::OffsetFetchTopic>{
                                                         {"orders", {0, 1}}, {"payments", {}}}};
    write_request(dir, name("offset_fetch", v), broker::encode_request(fetch, v, 28, client));
  }
  write_request(dir, "offset_fetch_v2_all",
                broker::encode_request(broker::OffsetFetchRequest{"orders-group", std::nullopt}, 2,
                                       29, client));
}

void write_requests(const fs::path& dir) {
  fs::create_directories(dir);
  const std::optional<std::string> client = "fuzz-client";
  for (std::int16_t v = 0; v <= 2; ++v) {
    write_request(dir, "api_versions_v" + std::to_string(v),
                  broker::encode_request(broker::ApiVersionsRequest{}, v, 1, client));
  }
  write_request(
      dir, "api_versions_v3",
      broker::encode_request(broker::ApiVersionsRequest{"librdkafka", "2.0.2"}, 3, 2, client));
  for (std::int16_t v = 0; v <= 8; ++v) {
    write_request(dir, "metadata_v" + std::to_string(v) + "_all",
                  broker::encode_request(broker::MetadataRequest{}, v, 3, client));
    broker::MetadataRequest some;
    some.topics = std::vector<std::string>{"orders", "payments"};
    write_request(dir, "metadata_v" + std::to_string(v) + "_topics",
                  broker::encode_request(some, v, 4, std::nullopt));
  }
  broker::MetadataRequest none;
  none.topics.emplace();
  none.allow_auto_topic_creation = false;
  write_request(dir, "metadata_v4_no_topics_no_auto", broker::encode_request(none, 4, 5, client));
  none.include_cluster_authorized_operations = true;
  none.include_topic_authorized_operations = true;
  write_request(dir, "metadata_v8_no_topics_operations",
                broker::encode_request(none, 8, 5, client));
  for (std::int16_t v = 0; v <= 5; ++v) {
    broker::InitProducerIdRequest idempotent;
    if (v >= 3) idempotent.producer_id = 1000;  // resuming after an epoch error
    if (v >= 3) idempotent.producer_epoch = 2;
    write_request(dir, "init_producer_id_v" + std::to_string(v),
                  broker::encode_request(idempotent, v, 12, client));
  }
  broker::InitProducerIdRequest transactional;
  transactional.transactional_id = "tx-1";
  transactional.transaction_timeout_ms = 60000;
  write_request(dir, "init_producer_id_v4_transactional",
                broker::encode_request(transactional, 4, 13, client));

  broker::ProduceRequest produce;
  produce.acks = -1;
  produce.timeout_ms = 1500;
  produce.topics = {{"orders", {{0, small_batch(0, 3)}, {1, std::nullopt}}}};
  write_request(dir, "produce_v3", broker::encode_request(produce, 3, 6, client));
  write_request(dir, "produce_v4", broker::encode_request(produce, 4, 6, client));
  const std::vector<broker::ProducerRecord> idempotent_records = {{std::nullopt, "v"}};
  produce.topics = {
      {"orders", {{0, broker::build_record_batch(idempotent_records, 1, 0, {1000, 0, 7, 0})}}}};
  write_request(dir, "produce_v3_idempotent", broker::encode_request(produce, 3, 6, client));
  produce.topics = {{"orders", {{0, small_batch(0, 3)}, {1, std::nullopt}}}};
  produce.transactional_id = "tx-1";
  produce.acks = 0;
  produce.topics = {{"payments", {{2, broker::Bytes{}}}}};
  write_request(dir, "produce_v3_txn_acks0", broker::encode_request(produce, 3, 7, std::nullopt));

  broker::FetchRequest fetch;
  fetch.max_wait_ms = 500;
  fetch.min_bytes = 1;
  fetch.isolation_level = 1;
  fetch.topics = {{"orders", {{0, 42, 1 << 20}, {1, 0, 4096}}}, {"payments", {{0, -1, 1}}}};
  write_request(dir, "fetch_v4", broker::encode_request(fetch, 4, 8, client));

  broker::ListOffsetsRequest list;
  list.topics = {{"orders", {{0, broker::kLatestTimestamp}, {1, broker::kEarliestTimestamp}}}};
  write_request(dir, "list_offsets_v1", broker::encode_request(list, 1, 9, client));

  write_group_requests(dir, client);

  // Near-misses the server must answer rather than drop: an unknown api and a version too new
  // (flexible ApiVersions v4, whose header still decodes).
  broker::Bytes unknown = broker::encode_request(broker::ApiVersionsRequest{}, 0, 10, client);
  unknown[4] = 0x00;
  unknown[5] = 0x2A;  // api key 42
  write_request(dir, "unsupported_api", unknown);
  broker::Bytes too_new =
      broker::encode_request(broker::ApiVersionsRequest{"x", "y"}, 3, 11, client);
  too_new[7] = 4;  // ApiVersions v4
  write_request(dir, "unsupported_version_api_versions_v4", too_new);
}

void write_record_batches(const fs::path& dir) {
  fs::create_directories(dir);
  write_file(dir / "one_record", small_batch(0, 1));
  write_file(dir / "five_records", small_batch(100, 5));
  broker::Bytes two = small_batch(0, 2);
  const broker::Bytes second = small_batch(2, 4);
  two.insert(two.end(), second.begin(), second.end());
  write_file(dir / "two_batches", two);
  // A fetch response cut inside its second batch.
  write_file(dir / "truncated_tail", broker::ByteView(two).first(two.size() - 7));
  // LogAppendTime (attribute bit 3) and a control batch (bit 5): the CRC harness mode fixes the
  // checksum these edits break.
  broker::Bytes log_append = small_batch(7, 2);
  log_append[22] |= 0x08;
  write_file(dir / "log_append_time_bad_crc", log_append);
  broker::Bytes control = small_batch(9, 1);
  control[22] |= 0x20;
  write_file(dir / "control_batch_bad_crc", control);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (e.g. tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  write_requests(root / "fuzz_request_decoder");
  write_record_batches(root / "fuzz_record_batch");
  return 0;
}
