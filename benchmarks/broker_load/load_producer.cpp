// A producer of the load: sends a small batch every 1/--produce-rate seconds while fewer than
// --producer-in-flight are unanswered, each record's value "producer:seq:send_ns", round robin
// over the partitions; each ack goes to the ledger, at the offset the broker gave it.

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <vector>

#include "load.hpp"
#include "protocol/records.hpp"

namespace broker_load {

void Load::produce_tick(Producer& p) {
  if (stopping_) return;
  if (p.conn.outstanding() < static_cast<std::size_t>(o_.producer_in_flight)) {
    const int part = p.next_partition;
    p.next_partition = (p.next_partition + 1) % o_.partitions;
    const long long now_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count();
    std::vector<pb::ProducerRecord> recs;
    for (int i = 0; i < o_.batch_records; ++i) {
      recs.push_back({std::nullopt, fmt::format("{}:{}:{}", p.index, p.next_seq + i, now_ns)});
    }
    pb::ProduceRequest req;
    req.acks = static_cast<std::int16_t>(o_.acks);
    req.timeout_ms = 30000;
    req.topics.push_back({kTopic, {{part, pb::build_record_batch(recs, now_ns / 1'000'000)}}});
    p.sent.push_back({part, p.next_seq, o_.batch_records});
    p.next_seq += o_.batch_records;
    p.conn.send(req, kProduceVersion, Kind::produce);
  }
  p.timer.expires_after(std::chrono::microseconds(1'000'000 / std::max(1, o_.produce_rate)));
  p.timer.async_wait([this, &p](const boost::system::error_code& ec) {
    if (!ec) produce_tick(p);
  });
}

void Load::on_produce(Producer& p, pb::ByteView payload, Clock::time_point sent) {
  ++stats_.responses;
  ++stats_.produce_responses;
  stats_.produce_us.push_back(micros(Clock::now() - sent));
  const auto resp = pb::decode_response<pb::ProduceResponse>(payload, kProduceVersion);
  const auto& part = resp.body.responses.at(0).partitions.at(0);
  if (p.sent.empty()) throw std::runtime_error("produce response with nothing sent");
  const auto [partition, first_seq, count] = p.sent.front();
  p.sent.pop_front();
  if (part.error_code != pb::Errc::none || part.index != partition) {
    failures_.add(fmt::format("producer {}: produce error {} on partition {}", p.index,
                              static_cast<int>(part.error_code), part.index));
  } else {
    ledger_.acked(static_cast<int>(partition), part.base_offset, p.index, first_seq, count);
  }
  maybe_finish();
}

}  // namespace broker_load
