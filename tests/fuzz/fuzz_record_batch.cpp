// fuzz_record_batch: the broker's record-batch validator and offset stamper, and the client's
// batch builder and parser, on fuzzer-made bytes.
//
// Every input is used three ways:
//   1. As a records blob, unchanged: validate_record_batches() and parse_record_batches() return
//      or throw DecodeError, nothing else. What validate accepts, assign_base_offsets() must
//      stamp without error, returning first + offset_count, changing only the baseOffset bytes,
//      and leaving a blob validate accepts with the same counts.
//   2. The same blob with the CRC-32C of every walkable batch recomputed ("CRC fix-up"): the
//      fuzzer cannot forge checksums, so without this the record parser behind the CRC check
//      would see only the seeds. Same invariants as 1.
//   3. As a recipe (FuzzedDataProvider): two lists of records with timestamps and base offsets,
//      built with build_record_batch(). Each batch alone and both back to back must validate
//      (batch and offset counts, max timestamp), parse back to exactly the records given (keys,
//      values, offsets, timestamps), and still do so after assign_base_offsets().
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "protocol/crc32c.hpp"
#include "protocol/errors.hpp"
#include "protocol/record_batch.hpp"
#include "protocol/records.hpp"

namespace {

namespace broker = purgatory::broker;
namespace L = broker::batch_layout;
using purgatory::fuzz::check;
using purgatory::fuzz::fail;
using Kind = broker::DecodeErrorKind;

// assign_base_offsets() is given a log end offset: never negative, and far from overflowing.
constexpr std::int64_t kMaxFirstOffset = std::int64_t{1} << 62;

std::uint64_t load_be(std::span<const std::uint8_t> b, std::size_t at, int width) {
  std::uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v = (v << 8) | b[at + static_cast<std::size_t>(i)];
  return v;
}

void store_be(std::span<std::uint8_t> b, std::size_t at, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) {
    b[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * (width - 1 - i)));
  }
}

// Recomputes the CRC of every batch whose header and length can be walked; stops at the first
// that cannot (the validator must then reject the blob on its own).
void fix_crcs(std::span<std::uint8_t> blob) {
  std::size_t at = 0;
  while (blob.size() - at >= L::kHeaderBytes) {
    const auto length = static_cast<std::int32_t>(load_be(blob, at + L::kBatchLength, 4));
    if (length < static_cast<std::int32_t>(L::kHeaderBytes - L::kLogOverheadBytes)) return;
    const std::size_t size = L::kLogOverheadBytes + static_cast<std::size_t>(length);
    if (size > blob.size() - at) return;
    const std::uint32_t crc =
        broker::crc32c(blob.subspan(at + L::kAttributes, size - L::kAttributes));
    store_be(blob, at + L::kCrc, crc, 4);
    at += size;
  }
}

std::optional<broker::RecordSetInfo> validate(broker::ByteView blob, const char* what) {
  try {
    return broker::validate_record_batches(blob);
  } catch (const broker::DecodeError& e) {
    check(e.kind() == Kind::corrupt_records, "{}: validate threw kind {}: {}", what,
          broker::to_string(e.kind()), e.what());
    check(e.kafka_error() == broker::Errc::corrupt_message, "{}: not CORRUPT_MESSAGE", what);
    return std::nullopt;
  }
}

std::optional<std::vector<broker::ConsumerRecord>> parse(broker::ByteView blob, const char* what) {
  try {
    return broker::parse_record_batches(blob);
  } catch (const broker::DecodeError& e) {
    check(e.kind() == Kind::corrupt_records || e.kind() == Kind::unsupported_compression,
          "{}: parse threw kind {}: {}", what, broker::to_string(e.kind()), e.what());
    return std::nullopt;
  }
}

bool same_info(const broker::RecordSetInfo& a, const broker::RecordSetInfo& b) {
  return a.batch_count == b.batch_count && a.offset_count == b.offset_count &&
         a.max_timestamp == b.max_timestamp;
}

// Stamps offsets from `first` into a copy of a blob validate accepted, and checks the result.
std::vector<std::uint8_t> stamp(broker::ByteView blob, const broker::RecordSetInfo& info,
                                std::int64_t first, const char* what) {
  std::vector<std::uint8_t> out(blob.begin(), blob.end());
  std::int64_t next = 0;
  try {
    next = broker::assign_base_offsets(out, first);
  } catch (const broker::DecodeError& e) {
    fail("{}: assign_base_offsets rejected a blob validate accepted: {}", what, e.what());
  }
  check(next == first + info.offset_count, "{}: assign_base_offsets returned {}, expected {} + {}",
        what, next, first, info.offset_count);
  // Only the baseOffset field of each batch may change, and it must hold the running offset.
  std::size_t at = 0;
  std::int64_t expected = first;
  for (std::size_t b = 0; b < info.batch_count; ++b) {
    const std::size_t size =
        L::kLogOverheadBytes + static_cast<std::size_t>(load_be(out, at + L::kBatchLength, 4));
    check(static_cast<std::int64_t>(load_be(out, at + L::kBaseOffset, 8)) == expected,
          "{}: batch {} stamped with the wrong base offset", what, b);
    check(std::equal(out.begin() + static_cast<std::ptrdiff_t>(at + 8),
                     out.begin() + static_cast<std::ptrdiff_t>(at + size),
                     blob.begin() + static_cast<std::ptrdiff_t>(at + 8)),
          "{}: assign_base_offsets changed bytes outside baseOffset of batch {}", what, b);
    expected += static_cast<std::int32_t>(load_be(out, at + L::kLastOffsetDelta, 4)) + 1;
    at += size;
  }
  check(at == out.size(), "{}: batches do not cover the blob after stamping", what);
  const std::optional<broker::RecordSetInfo> again = validate(out, what);
  check(again && same_info(*again, info), "{}: stamped blob no longer validates the same", what);
  return out;
}

// Modes 1 and 2: validate, stamp what validates, and parse.
void check_blob(broker::ByteView blob, std::int64_t first_offset, const char* what) {
  const std::optional<broker::RecordSetInfo> info = validate(blob, what);
  if (info) {
    check(info->batch_count > 0 || blob.empty(), "{}: non-empty blob with no batch", what);
    check(info->offset_count >= static_cast<std::int64_t>(info->batch_count),
          "{}: fewer offsets than batches", what);
    (void)stamp(blob, *info, first_offset, what);
  }
  (void)parse(blob, what);
}

// Mode 3: a batch built from fuzzer-chosen records.
struct Recipe {
  std::vector<broker::ProducerRecord> records;
  std::int64_t timestamp = 0;
  std::int64_t base_offset = 0;
};

std::optional<std::string> consume_optional_bytes(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) return std::nullopt;
  return in.ConsumeRandomLengthString(64);
}

Recipe consume_recipe(FuzzedDataProvider& in) {
  Recipe r;
  const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(1, 12);
  for (std::size_t i = 0; i < n; ++i) {
    broker::ProducerRecord rec;
    rec.key = consume_optional_bytes(in);
    rec.value = consume_optional_bytes(in);
    r.records.push_back(std::move(rec));
  }
  r.timestamp = in.ConsumeIntegral<std::int64_t>();
  // Every record's offset (base + index, index < 12) must fit int64: a batch past the limit is
  // the raw modes' business (tests/demo_broker/records_overflow_test.cpp).
  r.base_offset = in.ConsumeIntegralInRange<std::int64_t>(
      std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max() - 16);
  return r;
}

void expect_records(const std::vector<broker::ConsumerRecord>& got, const Recipe& a,
                    std::int64_t a_base, const Recipe* b, std::int64_t b_base, const char* what) {
  std::vector<broker::ConsumerRecord> want;
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    want.push_back(
        {a_base + static_cast<std::int64_t>(i), a.timestamp, a.records[i].key, a.records[i].value});
  }
  if (b != nullptr) {
    for (std::size_t i = 0; i < b->records.size(); ++i) {
      want.push_back({b_base + static_cast<std::int64_t>(i), b->timestamp, b->records[i].key,
                      b->records[i].value});
    }
  }
  check(got == want, "{}: parse returned {} records, not the {} built", what, got.size(),
        want.size());
}

void check_built(FuzzedDataProvider& in) {
  const Recipe a = consume_recipe(in);
  const Recipe b = consume_recipe(in);
  const std::int64_t first = in.ConsumeIntegralInRange<std::int64_t>(0, kMaxFirstOffset);
  const broker::Bytes batch_a = broker::build_record_batch(a.records, a.timestamp, a.base_offset);
  const broker::Bytes batch_b = broker::build_record_batch(b.records, b.timestamp, b.base_offset);

  const auto n_a = static_cast<std::int64_t>(a.records.size());
  const auto n_b = static_cast<std::int64_t>(b.records.size());
  const std::optional<broker::RecordSetInfo> info_a = validate(batch_a, "built batch");
  check(info_a && info_a->batch_count == 1 && info_a->offset_count == n_a &&
            info_a->max_timestamp == std::max<std::int64_t>(a.timestamp, -1),
        "validate does not accept a built batch of {} records as such", n_a);
  const std::optional<std::vector<broker::ConsumerRecord>> got_a = parse(batch_a, "built batch");
  check(got_a.has_value(), "parse rejects a built batch");
  expect_records(*got_a, a, a.base_offset, nullptr, 0, "built batch");

  broker::Bytes both = batch_a;
  both.insert(both.end(), batch_b.begin(), batch_b.end());
  const std::optional<broker::RecordSetInfo> info = validate(both, "two built batches");
  check(info && info->batch_count == 2 && info->offset_count == n_a + n_b &&
            info->max_timestamp == std::max<std::int64_t>({a.timestamp, b.timestamp, -1}),
        "validate does not accept two built batches back to back");
  const std::vector<std::uint8_t> stamped = stamp(both, *info, first, "two built batches");
  const std::optional<std::vector<broker::ConsumerRecord>> got = parse(stamped, "stamped batches");
  check(got.has_value(), "parse rejects two stamped batches");
  expect_records(*got, a, first, &b, first + n_a, "stamped batches");

  // A fetch response may end in a batch cut short: parse skips it and keeps the whole ones.
  const std::size_t cut = in.ConsumeIntegralInRange<std::size_t>(1, batch_b.size() - 1);
  const std::optional<std::vector<broker::ConsumerRecord>> cut_short =
      parse(broker::ByteView(stamped).first(stamped.size() - cut), "truncated tail");
  check(cut_short.has_value(), "parse rejects a blob whose last batch is cut short");
  expect_records(*cut_short, a, first, nullptr, 0, "truncated tail");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const broker::ByteView blob(data, size);
  FuzzedDataProvider in(data, size);
  const std::int64_t first_offset = in.ConsumeIntegralInRange<std::int64_t>(0, kMaxFirstOffset);

  check_blob(blob, first_offset, "raw blob");

  std::vector<std::uint8_t> fixed(blob.begin(), blob.end());
  fix_crcs(fixed);
  if (fixed != std::vector<std::uint8_t>(blob.begin(), blob.end())) {
    check_blob(fixed, first_offset, "crc fixed-up blob");
  }

  FuzzedDataProvider recipe(data, size);
  check_built(recipe);
  return 0;
}
