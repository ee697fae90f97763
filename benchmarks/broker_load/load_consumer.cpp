// A consumer of the load: long-polls Fetch from its next offset, and checks each record it reads
// (no gap, each producer's sequence increasing, the same record at each offset as every other
// consumer of the partition) before fetching again, until it reaches its partition's acked end.

#include <chrono>
#include <cstdio>
#include <vector>

#include "load.hpp"
#include "protocol/records.hpp"

namespace broker_load {

void Load::fetch(Consumer& c) {
  pb::FetchRequest req;
  req.max_wait_ms = o_.max_wait_ms;
  req.min_bytes = 1;
  req.max_bytes = 1 << 20;
  req.topics.push_back({kTopic, {{c.partition, c.next_offset, 1 << 20}}});
  c.conn.send(req, kFetchVersion, Kind::fetch);
}

void Load::on_fetch(Consumer& c, pb::ByteView payload, Clock::time_point sent) {
  const auto now = Clock::now();
  ++stats_.responses;
  ++stats_.fetch_responses;
  stats_.fetch_us.push_back(micros(now - sent));
  const auto resp = pb::decode_response<pb::FetchResponse>(payload, kFetchVersion);
  const auto& part = resp.body.responses.at(0).partitions.at(0);
  if (part.error_code != pb::Errc::none) {
    failures_.add(fmt::format("consumer {}: fetch error {} at offset {}", c.index,
                              static_cast<int>(part.error_code), c.next_offset));
    return;  // this consumer stops; verify() reports it short
  }
  const auto records =
      part.records ? pb::parse_record_batches(*part.records) : std::vector<pb::ConsumerRecord>{};
  if (records.empty()) ++stats_.empty_fetches;
  for (const pb::ConsumerRecord& r : records) {
    if (r.offset < c.next_offset) continue;  // a batch starting before the fetch offset
    if (r.offset != c.next_offset) {
      failures_.add(fmt::format("consumer {}: gap: offset {} after {}", c.index, r.offset,
                                c.next_offset - 1));
      return;
    }
    RecordId id;
    long long send_ns = 0;
    if (!r.value ||
        std::sscanf(r.value->c_str(), "%d:%ld:%lld", &id.producer, &id.seq, &send_ns) != 3) {
      failures_.add(fmt::format("consumer {}: unreadable value at offset {}", c.index, r.offset));
      return;
    }
    auto [it, fresh] = c.last_seq.emplace(id.producer, id.seq);
    if (!fresh) {
      if (id.seq <= it->second) {
        failures_.add(
            fmt::format("consumer {}: producer {} seq {} after {} (out of order or duplicate)",
                        c.index, id.producer, id.seq, it->second));
      }
      it->second = id.seq;
    }
    if (!ledger_.consumed(c.partition, r.offset, id)) {
      failures_.add(
          fmt::format("consumer {}: offset {} differs from another consumer's", c.index, r.offset));
    }
    ++c.next_offset;
    ++stats_.records_consumed;
    stats_.time_to_data_us.push_back(
        micros(now.time_since_epoch() - std::chrono::nanoseconds(send_ns)));
  }
  if (producers_drained() && c.next_offset >= ledger_.acked_end(c.partition)) {
    c.done = true;
    maybe_finish();
    return;
  }
  fetch(c);
}

}  // namespace broker_load
