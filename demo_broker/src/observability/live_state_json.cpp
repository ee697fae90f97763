// GET /api/state: LiveState as JSON. The shape is documented in docs/live-view.md and checked by
// tests/demo_broker/e2e/live_view_e2e.py; change both together.
#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "observability/live_state.hpp"

namespace purgatory::broker {

namespace {

// Upper bounds (ms) of the wait-time histogram the page draws; the last bucket is "+Inf".
constexpr std::array<std::int64_t, 14> kWaitBoundsMs{1,   2,   5,    10,   25,   50,    100,
                                                     250, 500, 1000, 2500, 5000, 10000, 30000};

double ms(Nanos n) {
  return std::chrono::duration<double, std::milli>(n).count();
}

// A minimal streaming JSON writer: the caller opens and closes; commas are automatic.
class Json {
 public:
  Json& begin_object(std::string_view key = {}) { return open(key, '{'); }
  Json& end_object() { return close('}'); }
  Json& begin_array(std::string_view key = {}) { return open(key, '['); }
  Json& end_array() { return close(']'); }
  Json& str(std::string_view key, std::string_view value) {
    name(key);
    quote(value);
    return *this;
  }
  Json& str(std::string_view value) { return str({}, value); }
  template <class T>
  Json& num(std::string_view key, T value) {
    name(key);
    if constexpr (std::is_floating_point_v<T>) {
      out_ += fmt::format("{:.3f}", value);
    } else {
      out_ += fmt::format("{}", value);
    }
    return *this;
  }
  template <class T>
  Json& num(T value) {
    return num({}, value);
  }
  Json& boolean(std::string_view key, bool value) {
    name(key);
    out_ += value ? "true" : "false";
    return *this;
  }
  Json& null(std::string_view key) {
    name(key);
    out_ += "null";
    return *this;
  }
  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  Json& open(std::string_view key, char c) {
    name(key);
    out_ += c;
    first_ = true;
    return *this;
  }
  Json& close(char c) {
    out_ += c;
    first_ = false;
    return *this;
  }
  void name(std::string_view key) {
    if (!first_) out_ += ',';
    first_ = false;
    if (!key.empty()) {
      quote(key);
      out_ += ':';
    }
  }
  void quote(std::string_view s) {
    out_ += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default:
          if (c < 0x20) {
            out_ += fmt::format("\\u{:04x}", c);
          } else {
            out_ += ch;
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  bool first_ = true;
};

void purgatory_json(Json& j, const LivePurgatory& p) {
  const PurgatoryMetrics& m = p.metrics;
  const Nanos now = p.snapshot.now;  // ages and time left as of the purgatory's own snapshot
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
  j.num("keys_total", p.snapshot.keys_total);
  j.begin_array("keys");
  for (const auto& entry : p.snapshot.keys) {
    j.begin_object();
    j.str("key", fmt::format("{}-{}", entry.key.topic, entry.key.partition));
    j.str("topic", entry.key.topic).num("partition", entry.key.partition);
    j.num("waiting", entry.waiting);
    j.begin_array("operations");
    for (const auto& op : entry.operations) {
      j.begin_object();
      j.num("age_ms", ms(now - op.watched_since));
      j.num("remaining_ms", ms(op.deadline - now));
      j.num("timeout_ms", ms(op.timeout));
      j.num("key_count", op.key_count);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

void timer_json(Json& j, const LiveState& s) {
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

}  // namespace

std::string to_json(const LiveState& s) {
  Json j;
  j.begin_object();
  j.num("version", 1);
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
  j.begin_array("purgatories");
  purgatory_json(j, s.fetch);
  purgatory_json(j, s.produce);
  j.end_array();
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
  j.num("last_outcome_seq", s.last_outcome_seq);
  j.begin_array("outcomes");
  for (const OutcomeEvent& e : s.outcomes) {
    j.begin_object();
    j.num("seq", e.seq).num("at_ms", ms(e.at - s.started));
    j.str("purgatory", e.purgatory).str("key", e.key).str("outcome", e.outcome);
    j.num("waited_ms", e.waited_ms).str("why", e.why);
    j.str("text", fmt::format("{} on {} {} after {:.0f} ms ({})", e.purgatory, e.key, e.outcome,
                              e.waited_ms, e.why));
    j.end_object();
  }
  j.end_array();
  j.end_object();
  return j.take();
}

}  // namespace purgatory::broker
