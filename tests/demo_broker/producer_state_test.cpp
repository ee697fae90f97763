// Idempotent producers in the partition log: ProducerStateTable's rules (Kafka's
// ProducerStateManager without transactions) and PartitionLog appending or refusing a batch in
// the same call that checks it. No sockets, no clock.
#include "log/producer_state.hpp"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "log/partition_log.hpp"
#include "protocol/records.hpp"

namespace pb = purgatory::broker;

namespace {

pb::BatchProducer producer(std::int64_t id, std::int16_t epoch, std::int32_t base_sequence,
                           std::int32_t records) {
  return pb::BatchProducer{id, epoch, base_sequence, records - 1};
}

// A batch of `records` records stamped with `p`, and its validated info.
struct Batch {
  pb::Bytes bytes;
  pb::RecordSetInfo info;
};

Batch batch(const pb::BatchProducer& p, const std::string& tag = "v") {
  std::vector<pb::ProducerRecord> recs;
  for (std::int32_t i = 0; i <= p.last_offset_delta; ++i)
    recs.push_back({std::nullopt, tag + std::to_string(i)});
  Batch b{pb::build_record_batch(recs, 1000, 0, p), {}};
  b.info = pb::validate_record_batches(b.bytes);
  return b;
}

pb::AppendResult append(pb::PartitionLog& log, const pb::BatchProducer& p) {
  Batch b = batch(p);
  return log.append(std::move(b.bytes), b.info);
}

}  // namespace

TEST_CASE("a batch's header carries its producer id, epoch and sequences 5..7") {
  const Batch b = batch(producer(42, 3, 5, 3));
  CHECK(b.info.producer == producer(42, 3, 5, 3));
  CHECK(b.info.producer.idempotent());
  CHECK(b.info.producer.last_sequence() == 7);
  CHECK_FALSE(b.info.transactional);
  // Sequences wrap after INT32_MAX, as Kafka's incrementSequence.
  CHECK(producer(1, 0, 0x7FFFFFFE, 4).last_sequence() == 1);
  CHECK_FALSE(batch(pb::BatchProducer{}).info.producer.idempotent());
}

TEST_CASE("in sequence: 3 + 2 records of one producer append at offsets 0 and 3") {
  pb::PartitionLog log(0, 0);
  const pb::AppendResult first = append(log, producer(7, 0, 0, 3));
  CHECK(first.error == pb::Errc::none);
  CHECK_FALSE(first.duplicate);
  CHECK(first.producer_added);
  CHECK(first.base_offset == 0);
  CHECK(first.next_offset == 3);
  const pb::AppendResult second = append(log, producer(7, 0, 3, 2));
  CHECK(second.base_offset == 3);
  CHECK_FALSE(second.producer_added);
  CHECK(log.log_end_offset() == 5);
  REQUIRE(log.producers().size() == 1);
  const auto snap = log.producers().snapshot(10);
  CHECK(snap[0].producer_id == 7);
  CHECK(snap[0].last_sequence == 4);
  CHECK(snap[0].last_offset == 4);
}

TEST_CASE("a retry of any of the last 5 batches: their original offsets, nothing appended") {
  pb::PartitionLog log(0, 0);
  for (int i = 0; i < 6; ++i)
    REQUIRE(append(log, producer(7, 0, 2 * i, 2)).base_offset == 2 * i);
  CHECK(log.log_end_offset() == 12);
  for (int i = 1; i < 6; ++i) {
    CAPTURE(i);
    const pb::AppendResult r = append(log, producer(7, 0, 2 * i, 2));
    CHECK(r.error == pb::Errc::none);
    CHECK(r.duplicate);
    CHECK(r.base_offset == 2 * i);
    CHECK(r.next_offset == 2 * i + 2);
  }
  CHECK(log.log_end_offset() == 12);
  // The first batch is no longer remembered: written, offset unknown.
  const pb::AppendResult old = append(log, producer(7, 0, 0, 2));
  CHECK(old.error == pb::Errc::duplicate_sequence_number);
  CHECK(log.log_end_offset() == 12);
  CHECK(log.batch_count() == 6);
}

TEST_CASE("a gap, an overlap and a new epoch not at 0 are OUT_OF_ORDER_SEQUENCE_NUMBER (45)") {
  pb::PartitionLog log(0, 0);
  REQUIRE(append(log, producer(7, 0, 0, 3)).error == pb::Errc::none);  // sequences 0..2
  const pb::AppendResult gap = append(log, producer(7, 0, 4, 1));
  CHECK(gap.error == pb::Errc::out_of_order_sequence_number);
  CHECK(gap.why.find("expected sequence 3, got 4..4") != std::string::npos);
  CHECK(append(log, producer(7, 0, 2, 2)).error == pb::Errc::out_of_order_sequence_number);
  CHECK(append(log, producer(7, 1, 3, 1)).error == pb::Errc::out_of_order_sequence_number);
  CHECK(log.log_end_offset() == 3);
  // Nothing was remembered of the refused batches: the next in sequence still fits.
  CHECK(append(log, producer(7, 0, 3, 1)).base_offset == 3);
}

TEST_CASE("a new epoch starts over at 0, and the old epoch is then INVALID_PRODUCER_EPOCH (47)") {
  pb::PartitionLog log(0, 0);
  REQUIRE(append(log, producer(7, 0, 0, 3)).error == pb::Errc::none);
  CHECK(append(log, producer(7, 1, 0, 1)).base_offset == 3);  // the Java producer's epoch bump
  const pb::AppendResult stale = append(log, producer(7, 0, 3, 1));
  CHECK(stale.error == pb::Errc::invalid_producer_epoch);
  CHECK(stale.why.find("epoch 0 is older than its current epoch 1") != std::string::npos);
  // Even an exact retry of an epoch-0 batch: its epoch is stale now.
  CHECK(append(log, producer(7, 0, 0, 3)).error == pb::Errc::invalid_producer_epoch);
  CHECK(log.log_end_offset() == 4);
}

TEST_CASE(
    "a producer unknown to the partition must start at sequence 0, else UNKNOWN_PRODUCER_ID") {
  pb::PartitionLog log(0, 0);
  CHECK(append(log, producer(9, 0, 5, 1)).error == pb::Errc::unknown_producer_id);
  CHECK(log.producers().size() == 0);
  CHECK(append(log, producer(9, 0, 0, 1)).error == pb::Errc::none);
}

TEST_CASE("batches of no producer (-1) are appended as they come, twice if sent twice") {
  pb::PartitionLog log(0, 0);
  CHECK(append(log, pb::BatchProducer{}).base_offset == 0);
  CHECK(append(log, pb::BatchProducer{}).base_offset == 1);
  CHECK(log.producers().size() == 0);
}

TEST_CASE("at most 3 producers per partition: the one idle longest is forgotten for a 4th") {
  pb::PartitionLog log(0, 0, 3);
  for (std::int64_t id = 1; id <= 3; ++id)
    REQUIRE(append(log, producer(id, 0, 0, 1)).error == pb::Errc::none);
  REQUIRE(append(log, producer(1, 0, 1, 1)).error == pb::Errc::none);  // 2 is now the idlest
  const pb::AppendResult fourth = append(log, producer(4, 0, 0, 1));
  CHECK(fourth.producer_added);
  CHECK(fourth.producer_forgotten);
  CHECK(log.producers().size() == 3);
  // Producer 2 was forgotten: its next batch is unknown, producers 1 and 3 carry on.
  CHECK(append(log, producer(2, 0, 1, 1)).error == pb::Errc::unknown_producer_id);
  CHECK(append(log, producer(1, 0, 2, 1)).error == pb::Errc::none);
  CHECK(append(log, producer(3, 0, 1, 1)).error == pb::Errc::none);
  const auto snap = log.producers().snapshot(2);
  REQUIRE(snap.size() == 2);
  CHECK(snap[0].producer_id == 3);  // most recent first
  CHECK(snap[1].producer_id == 1);
  CHECK_THROWS_AS(pb::ProducerStateTable(0), std::invalid_argument);
}
