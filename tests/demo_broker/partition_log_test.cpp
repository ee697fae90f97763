// PartitionLog: offsets, the high watermark as the slowest follower, what a fetch may read, and
// retention. No sockets, no clock: every case runs in microseconds.
#include "log/partition_log.hpp"

#include <doctest/doctest.h>

#include "protocol/record_batch.hpp"
#include "protocol/records.hpp"

namespace pb = purgatory::broker;

namespace {

pb::Bytes batch_of(int records, std::size_t value_bytes = 10) {
  std::vector<pb::ProducerRecord> recs;
  for (int i = 0; i < records; ++i)
    recs.push_back({std::nullopt, std::string(value_bytes, 'x')});
  return pb::build_record_batch(recs, 1000);
}

std::int64_t append(pb::PartitionLog& log, int records, std::size_t value_bytes = 10) {
  pb::Bytes b = batch_of(records, value_bytes);
  const pb::RecordSetInfo info = pb::validate_record_batches(b);
  return log.append(std::move(b), info.offset_count, info.max_timestamp);
}

}  // namespace

TEST_CASE("PartitionLog without followers: 3 + 2 records get offsets 0 and 3, HW = LEO = 5") {
  pb::PartitionLog log(0, 0);
  CHECK(append(log, 3) == 0);
  CHECK(append(log, 2) == 3);
  CHECK(log.log_end_offset() == 5);
  CHECK(log.high_watermark() == 5);
  const pb::Bytes all = log.read(0, 1 << 20, true);
  const auto records = pb::parse_record_batches(all);  // checks every CRC: only baseOffset moved
  REQUIRE(records.size() == 5);
  CHECK(records[0].offset == 0);
  CHECK(records[4].offset == 4);
}

TEST_CASE("PartitionLog: the HW is the slowest of 2 followers, and consumers see only below it") {
  pb::PartitionLog log(2, 0);
  append(log, 4);
  CHECK(log.high_watermark() == 0);
  CHECK(log.bytes_available(0) == 0);
  CHECK(log.read(0, 1 << 20, true).empty());
  CHECK_FALSE(log.update_follower(0, 4));  // one follower is not enough
  CHECK(log.high_watermark() == 0);
  CHECK(log.update_follower(1, 4));
  CHECK(log.high_watermark() == 4);
  CHECK(log.bytes_available(0) == log.size_bytes());
  CHECK_FALSE(log.update_follower(1, 2));  // a follower never goes back
  CHECK(log.follower_offset(1) == 4);
}

TEST_CASE("PartitionLog: a fetch from the middle of a batch gets the whole batch") {
  pb::PartitionLog log(0, 0);
  append(log, 5);
  append(log, 5);
  const auto records = pb::parse_record_batches(log.read(7, 1 << 20, true));
  REQUIRE(records.size() == 5);
  CHECK(records.front().offset == 5);
  CHECK(log.bytes_available(7) == log.bytes_available(5));
  CHECK(log.bytes_available(10) == 0);
}

TEST_CASE("PartitionLog: max_bytes smaller than the first batch still returns it with min_one") {
  pb::PartitionLog log(0, 0);
  append(log, 1, 500);
  append(log, 1, 500);
  CHECK(pb::parse_record_batches(log.read(0, 100, true)).size() == 1);
  CHECK(log.read(0, 100, false).empty());
  const std::size_t one = log.read(0, 100, true).size();
  CHECK(pb::parse_record_batches(log.read(0, 2 * one, false)).size() == 2);
}

TEST_CASE("PartitionLog: in_range covers log start to log end inclusive") {
  pb::PartitionLog log(0, 0);
  CHECK(log.in_range(0));
  append(log, 3);
  CHECK(log.in_range(3));
  CHECK_FALSE(log.in_range(4));
  CHECK_FALSE(log.in_range(-1));
}

TEST_CASE("PartitionLog retention: over 1000 bytes the oldest replicated batches are dropped") {
  pb::PartitionLog log(1, 1000);
  for (int i = 0; i < 10; ++i)
    append(log, 1, 200);
  CHECK(log.log_start_offset() == 0);  // nothing replicated yet: nothing may go
  log.update_follower(0, 10);
  CHECK(log.size_bytes() <= 1000);
  CHECK(log.log_start_offset() > 0);
  CHECK_FALSE(log.in_range(0));
  const auto records = pb::parse_record_batches(log.read(log.log_start_offset(), 1 << 20, true));
  CHECK(records.back().offset == 9);
}

TEST_CASE("PartitionLog: offset_for_timestamp finds the first batch at or after it") {
  pb::PartitionLog log(0, 0);
  append(log, 2);  // every test batch is stamped 1000
  CHECK(log.offset_for_timestamp(999) == 0);
  CHECK(log.offset_for_timestamp(1000) == 0);
  CHECK_FALSE(log.offset_for_timestamp(1001).has_value());
}
