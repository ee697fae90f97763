// GET /api/state: LiveState as JSON. The shape is documented in docs/live-view.md and checked by
// tests/demo_broker/e2e/live_view_e2e.py; change both together.
#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "observability/json_writer.hpp"
#include "observability/live_state.hpp"

namespace purgatory::broker {

namespace {

// Upper bounds (ms) of the wait-time histogram the page draws; the last bucket is "+Inf".
constexpr std::array<std::int64_t, 14> kWaitBoundsMs{1,   2,   5,    10,   25,   50,    100,
                                                     250, 500, 1000, 2500, 5000, 10000, 30000};

// One element of "purgatories": its counters and histogram, then `entries` (listed keys of
// `snap`), each key's own fields written by key_fields(key).
template <class Key, class KeyFields>
void purgatory_json(JsonWriter& j, const PurgatoryMetrics& m, const PurgatorySnapshot<Key>& snap,
                    const std::vector<const typename PurgatorySnapshot<Key>::KeyEntry*>& entries,
                    KeyFields&& key_fields) {
  j.begin_object();
  j.str("name", m.name);
  j.num("waiting", m.delayed).num("watched", m.watched);
  j.num("completed_total", m.completed_total).num("expired_total", m.expired_total);
  j.num("shut_down_total", m.shut_down_total).num("cancelled_total", m.cancelled_total);
  j.begin_object("wait_ms");
  j.num("count", m.waited.count).num("p50", ms(m.waited.p50)).num("p99", ms(m.waited.p99));
  j.num("max", ms(m.waited.max));
  j.begin_array("buckets");
  std::uint64_t below = 0;
  for (const std::int64_t bound : kWaitBoundsMs) {
    const std::uint64_t at_most =
        m.waited_histogram.count_at_most(std::chrono::milliseconds(bound));
    j.begin_object().num("le", bound).num("count", at_most - std::min(at_most, below));
    j.end_object();
    below = std::max(below, at_most);
  }
  const std::uint64_t total = m.waited_histogram.count();
  j.begin_object().str("le", "+Inf").num("count", total - std::min(total, below)).end_object();
  j.end_array();
  j.end_object();
  j.num("keys_total", snap.keys_total);
  j.begin_array("keys");
  for (const auto* entry : entries) {
    j.begin_object();
    key_fields(entry->key);
    j.num("waiting", entry->waiting);
    j.begin_array("operations");
    for (const auto& op : entry->operations) {
      // Ages and time left as of the purgatory's own snapshot.
      j.begin_object();
      operation_times_json(j, snap.now, op.watched_since, op.deadline, op.timeout);
      j.num("key_count", op.key_count);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

// Every key listed, in the snapshot's order.
template <class Key>
std::vector<const typename PurgatorySnapshot<Key>::KeyEntry*> listed(
    const PurgatorySnapshot<Key>& snap) {
  std::vector<const typename PurgatorySnapshot<Key>::KeyEntry*> out;
  for (const auto& entry : snap.keys)
    out.push_back(&entry);
  return out;
}

// The listed keys due soonest, at most LiveState::kMaxKeys: the ones a person watches.
template <class Key>
std::vector<const typename PurgatorySnapshot<Key>::KeyEntry*> soonest(
    const PurgatorySnapshot<Key>& snap) {
  auto out = listed(snap);
  const auto deadline = [](const auto* e) {
    return e->operations.empty() ? Nanos::max() : e->operations.front().deadline;
  };
  const auto cut = std::min(out.size(), LiveState::kMaxKeys);
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(cut), out.end(),
                    [&](const auto* a, const auto* b) { return deadline(a) < deadline(b); });
  out.resize(cut);
  return out;
}

void purgatories_json(JsonWriter& j, const LiveState& s) {
  const auto partition = [&](const TopicPartition& tp) {
    j.str("key", fmt::format("{}-{}", tp.topic, tp.partition));
    j.str("topic", tp.topic).num("partition", tp.partition);
  };
  j.begin_array("purgatories");
  purgatory_json(j, s.fetch.metrics, s.fetch.snapshot, listed(s.fetch.snapshot), partition);
  purgatory_json(j, s.produce.metrics, s.produce.snapshot, listed(s.produce.snapshot), partition);
  purgatory_json(j, s.join, s.groups.join, soonest(s.groups.join),
                 [&](const std::string& group) { j.str("key", group).str("group", group); });
  purgatory_json(j, s.heartbeat, s.groups.heartbeat, soonest(s.groups.heartbeat),
                 [&](const MemberKey& key) {
                   j.str("key", to_string(key)).str("group", key.group_id);
                   j.str("member", key.member_id);
                 });
  j.end_array();
}

void timer_json(JsonWriter& j, const LiveState& s) {
  const WheelSnapshot& w = s.wheel;
  j.begin_object("timer");
  j.num("tasks", w.tasks).num("wheel_size", s.wheel_size);
  j.num("wheel_time_lag_ms", ms(w.now - w.wheel_time));
  if (w.next_expiration) {
    j.num("next_expiration_in_ms", ms(*w.next_expiration - w.now));
  } else {
    j.null("next_expiration_in_ms");
  }
  j.begin_array("levels");
  for (const auto& level : w.levels) {
    j.begin_object();
    j.num("tick_ms", ms(level.tick)).num("interval_ms", ms(level.interval));
    j.num("tasks", level.tasks);
    j.num("current_time_offset_ms", ms(level.current_time - w.now));
    j.begin_array("buckets");
    for (const std::size_t n : level.buckets)
      j.num(n);
    j.end_array();
    j.num("ahead", level.ahead);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

void producers_json(JsonWriter& j, const LiveState& s) {
  const IdempotenceStats& i = s.idempotence;
  j.begin_object("producers");
  j.num("ids_issued", i.producer_ids_issued).num("states", i.producer_states);
  j.num("states_forgotten", i.producer_states_forgotten);
  j.num("duplicate_batches", i.duplicate_batches);
  j.begin_object("refused");
  j.num("OUT_OF_ORDER_SEQUENCE_NUMBER", i.out_of_order_batches);
  j.num("INVALID_PRODUCER_EPOCH", i.stale_epoch_batches);
  j.num("UNKNOWN_PRODUCER_ID", i.unknown_producer_batches);
  j.end_object();
  j.num("transactions_refused", i.transactional_refused);
  j.begin_array("recent");
  for (const LiveProducer& p : s.producers) {
    j.begin_object();
    j.str("key", fmt::format("{}-{}", p.topic, p.partition));
    j.str("topic", p.topic).num("partition", p.partition);
    j.num("producer_id", p.producer.producer_id).num("epoch", p.producer.producer_epoch);
    j.num("last_sequence", p.producer.last_sequence).num("last_offset", p.producer.last_offset);
    j.num("batches", p.producer.batches);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

}  // namespace

void operation_times_json(JsonWriter& j, Nanos now, Nanos watched_since, Nanos deadline,
                          Nanos timeout) {
  j.num("age_ms", ms(now - watched_since));
  j.num("remaining_ms", ms(deadline - now));
  j.num("timeout_ms", ms(timeout));
}

std::string to_json(const LiveState& s) {
  JsonWriter j;
  j.begin_object();
  j.num("version", 2);
  j.num("uptime_ms", ms(s.taken - s.started));
  j.begin_object("broker");
  j.num("kafka_port", s.kafka_port).num("node_id", s.node_id);
  j.num("connections_open", s.connections_open).num("requests", s.requests);
  j.boolean("demo_running", s.demo_running);
  j.begin_array("replication_delays_ms");
  for (const std::int64_t d : s.replication_delays_ms)
    j.num(d);
  j.end_array();
  j.end_object();
  purgatories_json(j, s);
  timer_json(j, s);
  j.num("partitions_total", s.partitions_total);
  j.begin_array("partitions");
  for (const LivePartition& p : s.partitions) {
    j.begin_object();
    j.str("key", fmt::format("{}-{}", p.topic, p.partition));
    j.str("topic", p.topic).num("partition", p.partition);
    j.num("log_start", p.log_start).num("log_end", p.log_end);
    j.num("high_watermark", p.high_watermark);
    j.begin_array("follower_offsets");
    for (const std::int64_t o : p.follower_offsets)
      j.num(o);
    j.end_array();
    j.end_object();
  }
  j.end_array();
  producers_json(j, s);
  groups_json(j, s);
  j.num("last_outcome_seq", s.last_outcome_seq);
  j.begin_array("outcomes");
  for (const OutcomeEvent& e : s.outcomes) {
    j.begin_object();
    j.num("seq", e.seq).num("at_ms", ms(e.at - s.started));
    j.str("purgatory", e.purgatory).str("key", e.key).str("outcome", e.outcome);
    j.num("waited_ms", e.waited_ms).str("why", e.why);
    j.str("text", !e.text.empty() ? e.text
                                  : fmt::format("{} on {} {} after {:.0f} ms ({})", e.purgatory,
                                                e.key, e.outcome, e.waited_ms, e.why));
    j.end_object();
  }
  j.end_array();
  j.end_object();
  return j.take();
}

}  // namespace purgatory::broker
