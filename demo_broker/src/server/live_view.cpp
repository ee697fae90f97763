#include "server/live_view.hpp"

#include <chrono>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "group/group_coordinator.hpp"
#include "observability/live_state.hpp"
#include "observability/prometheus_exposition.hpp"
#include "protocol/records.hpp"
#include "requests/fetch_handler.hpp"
#include "requests/outcome_log.hpp"
#include "requests/produce_handler.hpp"
#include "requests/replication.hpp"
#include "server/live_view_http.hpp"
#include "server/ui_responder.hpp"

namespace purgatory::broker {

namespace {

// The partitions (at most LiveState::kMaxPartitions) and the idempotent producers they remember.
void add_partitions(const LogStore& log, LiveState& s) {
  for (const auto& [topic, partitions] : log.topics()) {
    for (std::size_t i = 0; i < partitions.size(); ++i) {
      ++s.partitions_total;
      if (s.partitions.size() >= LiveState::kMaxPartitions) continue;
      const PartitionLog& pl = partitions[i];
      LivePartition& lp = s.partitions.emplace_back();
      lp.topic = topic;
      lp.partition = static_cast<std::int32_t>(i);
      lp.log_start = pl.log_start_offset();
      lp.log_end = pl.log_end_offset();
      lp.high_watermark = pl.high_watermark();
      for (std::size_t f = 0; f < pl.followers(); ++f)
        lp.follower_offsets.push_back(pl.follower_offset(f));
      for (const ProducerSnapshot& p : pl.producers().snapshot(LiveState::kProducersPerPartition)) {
        if (s.producers.size() >= LiveState::kMaxProducers) break;
        s.producers.push_back(LiveProducer{topic, lp.partition, p});
      }
    }
  }
}

}  // namespace

LiveView::LiveView(boost::asio::io_context& io, const BrokerConfig& config, Parts parts)
    : config_(config),
      parts_(std::move(parts)),
      responder_(std::make_shared<UiResponder>()),
      members_(parts_.groups, parts_.timer, parts_.log, config.groups, parts_.logger),
      server_(io, [this] { return to_prometheus_text(parts_.metrics()); }) {
  add_routes();
}

LiveView::~LiveView() {
  stop();
}

void LiveView::add_routes() {
  server_.route("GET", "/", [](const HttpRequest&) {
    return HttpReply{200, "text/html; charset=utf-8", std::string(live_view_page())};
  });
  server_.route("GET", "/api/state", [this](const HttpRequest& r) { return state(r); });
  server_.route("POST", "/api/produce", [this](const HttpRequest& r) { return produce(r); });
  server_.route("POST", "/api/fetch", [this](const HttpRequest& r) { return fetch(r); });
  server_.route("POST", "/api/replication-delay",
                [this](const HttpRequest& r) { return replication_delay(r); });
  server_.route("POST", "/api/demo", [this](const HttpRequest&) { return play_demo(); });
  server_.route("POST", "/api/members/start",
                [this](const HttpRequest& r) { return members_.start(r); });
  server_.route("POST", "/api/members/stop",
                [this](const HttpRequest& r) { return members_.stop(r); });
  server_.route("POST", "/api/members/freeze",
                [this](const HttpRequest& r) { return members_.freeze(r, true); });
  server_.route("POST", "/api/members/thaw",
                [this](const HttpRequest& r) { return members_.freeze(r, false); });
}

void LiveView::start() {
  server_.start(config_.ui_host, config_.ui_port);
}

void LiveView::stop() {
  server_.stop();
  responder_->close("broker shutting down");
}

std::string LiveView::state_json(std::uint64_t since_outcome) const {
  LiveState s;
  s.started = started_;
  s.kafka_port = parts_.kafka_port();
  s.node_id = config_.node_id;
  for (const auto d : parts_.replication.delays())
    s.replication_delays_ms.push_back(d.count());
  const BrokerMetrics m = parts_.metrics();
  s.connections_open = m.connections_open;
  s.requests = m.requests;
  s.demo_running = config_.ui_demo_running && config_.ui_demo_running();
  // Bounded copies; each lock is released before anything is serialized below.
  const SnapshotLimits limits{32, 20};
  s.fetch = {m.fetch, parts_.fetch.purgatory().snapshot(limits)};
  s.produce = {m.produce, parts_.produce.purgatory().snapshot(limits)};
  s.join = m.join;
  s.heartbeat = m.heartbeat;
  s.wheel = parts_.timer->wheel_snapshot(4);  // 4 x 20 counters: 1 ms to 8 s per bucket
  s.wheel_size = TimerOptions{}.wheel_size;
  add_partitions(parts_.log, s);
  s.idempotence = m.idempotence;
  members_.add_to(s);
  parts_.outcomes.for_each_after(since_outcome,
                                 [&](const OutcomeEvent& e) { s.outcomes.push_back(e); });
  s.last_outcome_seq = parts_.outcomes.last_seq();
  s.taken = std::chrono::steady_clock::now();
  return to_json(s);
}

HttpReply LiveView::state(const HttpRequest& req) const {
  try {
    const RequestFields params = fields(req);
    const auto since = params.integer("since", 0, std::numeric_limits<std::int64_t>::max(), 0);
    return json_reply(state_json(static_cast<std::uint64_t>(since)));
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
}

std::optional<HttpReply> LiveView::too_many_parked() const {
  if (responder_->parked() < UiResponder::kMaxParked) return std::nullopt;
  return text_reply(
      429, fmt::format("{} requests of the page are already waiting", responder_->parked()));
}

HttpReply LiveView::produce(const HttpRequest& req) {
  ProduceRequest produce;
  std::string topic;
  std::int64_t count = 0;
  std::int64_t partition = 0;
  try {
    const RequestFields params = fields(req);
    topic = params.name("topic");
    partition = params.integer("partition", 0, config_.partitions - 1, 0);
    count = params.integer("count", 1, 10000, 10);
    const auto value_bytes = params.integer("value_bytes", 0, 100000, 100);
    produce.acks = static_cast<std::int16_t>(params.integer("acks", -1, 1, 1));
    produce.timeout_ms = static_cast<std::int32_t>(params.integer("timeout_ms", 0, 600000, 1000));
    std::vector<ProducerRecord> records;
    for (std::int64_t i = 0; i < count; ++i) {
      std::string value = fmt::format("ui-{} ", i);
      value.resize(static_cast<std::size_t>(value_bytes), '.');
      records.push_back({fmt::format("k{}", i), std::move(value)});
    }
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    produce.topics = {
        {topic,
         {{static_cast<std::int32_t>(partition), build_record_batch(records, now.count())}}}};
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
  if (produce.acks == -1) {
    if (auto busy = too_many_parked()) return std::move(*busy);
  }
  const ResponseSlot slot{responder_, responder_->next_seq(), 3, 0};
  parts_.produce.handle(slot, std::move(produce));
  return json_reply(fmt::format(R"({{"ok":true,"topic":"{}","partition":{},"records":{}}})", topic,
                                partition, count));
}

HttpReply LiveView::fetch(const HttpRequest& req) {
  FetchRequest fetch;
  std::string topic;
  std::int64_t partition = 0;
  std::int64_t offset = 0;
  try {
    const RequestFields params = fields(req);
    topic = params.name("topic");
    partition = params.integer("partition", 0, config_.partitions - 1, 0);
    fetch.min_bytes = static_cast<std::int32_t>(params.integer("min_bytes", 0, 100 << 20, 1));
    fetch.max_wait_ms = static_cast<std::int32_t>(params.integer("max_wait_ms", 0, 300000, 10000));
    // Default: the log end, so the fetch waits for records produced from now on.
    std::vector<PartitionLog>* logs = parts_.log.get_or_create(topic);
    const std::int64_t end =
        logs == nullptr ? 0 : (*logs)[static_cast<std::size_t>(partition)].log_end_offset();
    offset = params.integer("offset", 0, std::numeric_limits<std::int64_t>::max(), end);
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
  if (auto busy = too_many_parked()) return std::move(*busy);
  fetch.max_bytes = 1 << 20;
  fetch.topics = {{topic, {{static_cast<std::int32_t>(partition), offset, 1 << 20}}}};
  const ResponseSlot slot{responder_, responder_->next_seq(), 4, 0};
  parts_.fetch.handle(slot, std::move(fetch));
  return json_reply(
      fmt::format(R"({{"ok":true,"key":"{}-{}","offset":{}}})", topic, partition, offset));
}

HttpReply LiveView::replication_delay(const HttpRequest& req) {
  const auto followers = static_cast<std::int64_t>(parts_.replication.delays().size());
  if (followers == 0) return bad_request("this broker has no simulated followers (--followers 0)");
  try {
    const RequestFields params = fields(req);
    const auto follower = params.integer("follower", 1, followers, std::nullopt);
    const auto delay = params.integer("delay_ms", 0, 600000, std::nullopt);
    parts_.replication.set_delay(static_cast<std::size_t>(follower - 1),
                                 std::chrono::milliseconds(delay));
    parts_.logger.event(
        fmt::format("follower {} now replicates {} ms after an append (set from the live view)",
                    follower, delay));
    return json_reply(fmt::format(R"({{"ok":true,"follower":{},"delay_ms":{}}})", follower, delay));
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
}

HttpReply LiveView::play_demo() {
  if (!config_.ui_play_demo) return text_reply(404, "this broker was started without the demo");
  const auto& wanted = config_.ui_demo_replication_delays;
  const std::size_t followers = parts_.replication.delays().size();
  if (wanted.size() > followers) {
    return text_reply(409, fmt::format("the demo needs {} simulated followers, this broker has {} "
                                       "(start it with --followers {})",
                                       wanted.size(), followers, wanted.size()));
  }
  if (config_.ui_demo_running && config_.ui_demo_running()) {
    return text_reply(409, "the demo is already playing");
  }
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    if (parts_.replication.delays()[i] == wanted[i]) continue;
    parts_.replication.set_delay(i, wanted[i]);
    parts_.logger.event(
        fmt::format("follower {} now replicates {} ms after an append (for the demo)", i + 1,
                    wanted[i].count()));
  }
  if (!config_.ui_play_demo()) return text_reply(409, "the demo is already playing");
  return json_reply(R"({"ok":true})");
}

}  // namespace purgatory::broker
