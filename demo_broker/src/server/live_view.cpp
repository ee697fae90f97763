// The live view (demo_broker --ui HOST:PORT): the page, GET /api/state and the page's controls,
// served by a MetricsServer on the broker's io thread. The controls build real Produce and Fetch
// requests and hand them to the same handlers as a client's, with a UiResponder that drops the
// answers: what the page parks is what kcat would park. Every field is validated; a bad one
// answers 400 naming it. The group controls are in live_view_groups.cpp.
#include <chrono>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "observability/live_state.hpp"
#include "purgatory/broker/broker.hpp"
#include "purgatory/broker/metrics_server.hpp"
#include "purgatory/broker/prometheus_exposition.hpp"
#include "purgatory/broker/records.hpp"
#include "requests/outcome_log.hpp"
#include "server/live_view_http.hpp"
#include "server/ui_responder.hpp"

namespace purgatory::broker {

void Broker::start_live_view() {
  ui_responder_ = std::make_shared<UiResponder>();
  ui_server_ =
      std::make_unique<MetricsServer>(io_, [this] { return to_prometheus_text(metrics()); });
  ui_server_->route("GET", "/", [](const HttpRequest&) {
    return HttpReply{200, "text/html; charset=utf-8", std::string(live_view_page())};
  });
  ui_server_->route("GET", "/api/state", [this](const HttpRequest& r) { return ui_state(r); });
  ui_server_->route("POST", "/api/produce", [this](const HttpRequest& r) { return ui_produce(r); });
  ui_server_->route("POST", "/api/fetch", [this](const HttpRequest& r) { return ui_fetch(r); });
  ui_server_->route("POST", "/api/replication-delay",
                    [this](const HttpRequest& r) { return ui_replication_delay(r); });
  ui_server_->route("POST", "/api/demo",
                    [this](const HttpRequest& r) { return handle_ui_demo_request(r); });
  ui_server_->route("POST", "/api/members/start",
                    [this](const HttpRequest& r) { return ui_member_start(r); });
  ui_server_->route("POST", "/api/members/stop",
                    [this](const HttpRequest& r) { return ui_member_stop(r); });
  ui_server_->route("POST", "/api/members/freeze",
                    [this](const HttpRequest& r) { return ui_member_freeze(r, true); });
  ui_server_->route("POST", "/api/members/thaw",
                    [this](const HttpRequest& r) { return ui_member_freeze(r, false); });
  ui_server_->start(config_.ui_host, config_.ui_port);
}

std::string Broker::live_state_json(std::uint64_t since_outcome) const {
  LiveState s;
  s.started = started_;
  s.kafka_port = port();
  s.node_id = config_.node_id;
  for (const auto d : config_.replication_delays)
    s.replication_delays_ms.push_back(d.count());
  const BrokerMetrics m = metrics();
  s.connections_open = m.connections_open;
  s.requests = m.requests;
  s.demo_running = config_.ui_demo_running && config_.ui_demo_running();
  // Bounded copies; each lock is released before anything is serialized below.
  const SnapshotLimits limits{32, 20};
  s.fetch = {m.fetch, fetch_purgatory_->snapshot(limits)};
  s.produce = {m.produce, produce_purgatory_->snapshot(limits)};
  s.join = m.join;
  s.heartbeat = m.heartbeat;
  s.wheel = timer_->wheel_snapshot(4);  // 4 x 20 counters: 1 ms to 8 s per bucket
  s.wheel_size = TimerOptions{}.wheel_size;
  for (const auto& [topic, partitions] : log_.topics()) {
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
  s.idempotence = m.idempotence;
  add_live_groups(s);
  outcomes_->for_each_after(since_outcome, [&](const OutcomeEvent& e) { s.outcomes.push_back(e); });
  s.last_outcome_seq = outcomes_->last_seq();
  s.taken = std::chrono::steady_clock::now();
  return to_json(s);
}

HttpReply Broker::ui_state(const HttpRequest& req) const {
  try {
    const RequestFields params = fields(req);
    const auto since = params.integer("since", 0, std::numeric_limits<std::int64_t>::max(), 0);
    return json_reply(live_state_json(static_cast<std::uint64_t>(since)));
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
}

HttpReply Broker::ui_produce(const HttpRequest& req) {
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
  if (produce.acks == -1 && ui_responder_->parked() >= UiResponder::kMaxParked) {
    return HttpReply{
        429, "text/plain; charset=utf-8",
        fmt::format("{} requests of the page are already waiting\n", ui_responder_->parked())};
  }
  const ResponseSlot slot{ui_responder_, ui_responder_->next_seq(), 3, 0};
  handle_produce(slot, std::move(produce));
  return json_reply(fmt::format(R"({{"ok":true,"topic":"{}","partition":{},"records":{}}})", topic,
                                partition, count));
}

HttpReply Broker::ui_fetch(const HttpRequest& req) {
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
    std::vector<PartitionLog>* logs = log_.get_or_create(topic);
    const std::int64_t end =
        logs == nullptr ? 0 : (*logs)[static_cast<std::size_t>(partition)].log_end_offset();
    offset = params.integer("offset", 0, std::numeric_limits<std::int64_t>::max(), end);
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
  if (ui_responder_->parked() >= UiResponder::kMaxParked) {
    return HttpReply{
        429, "text/plain; charset=utf-8",
        fmt::format("{} requests of the page are already waiting\n", ui_responder_->parked())};
  }
  fetch.max_bytes = 1 << 20;
  fetch.topics = {{topic, {{static_cast<std::int32_t>(partition), offset, 1 << 20}}}};
  const ResponseSlot slot{ui_responder_, ui_responder_->next_seq(), 4, 0};
  handle_fetch(slot, std::move(fetch));
  return json_reply(
      fmt::format(R"({{"ok":true,"key":"{}-{}","offset":{}}})", topic, partition, offset));
}

HttpReply Broker::ui_replication_delay(const HttpRequest& req) {
  const auto followers = static_cast<std::int64_t>(config_.replication_delays.size());
  if (followers == 0) return bad_request("this broker has no simulated followers (--followers 0)");
  try {
    const RequestFields params = fields(req);
    const auto follower = params.integer("follower", 1, followers, std::nullopt);
    const auto delay = params.integer("delay_ms", 0, 600000, std::nullopt);
    config_.replication_delays[static_cast<std::size_t>(follower - 1)] =
        std::chrono::milliseconds(delay);
    event(fmt::format("follower {} now replicates {} ms after an append (set from the live view)",
                      follower, delay));
    return json_reply(fmt::format(R"({{"ok":true,"follower":{},"delay_ms":{}}})", follower, delay));
  } catch (const std::invalid_argument& e) {
    return bad_request(e.what());
  }
}

HttpReply Broker::handle_ui_demo_request(const HttpRequest&) {
  if (!config_.ui_play_demo) {
    return HttpReply{404, "text/plain; charset=utf-8",
                     "this broker was started without the demo\n"};
  }
  const auto& wanted = config_.ui_demo_replication_delays;
  if (wanted.size() > config_.replication_delays.size()) {
    return HttpReply{409, "text/plain; charset=utf-8",
                     fmt::format("the demo needs {} simulated followers, this broker has {} "
                                 "(start it with --followers {})\n",
                                 wanted.size(), config_.replication_delays.size(), wanted.size())};
  }
  if (config_.ui_demo_running && config_.ui_demo_running()) {
    return HttpReply{409, "text/plain; charset=utf-8", "the demo is already playing\n"};
  }
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    if (config_.replication_delays[i] == wanted[i]) continue;
    config_.replication_delays[i] = wanted[i];
    event(fmt::format("follower {} now replicates {} ms after an append (for the demo)", i + 1,
                      wanted[i].count()));
  }
  if (!config_.ui_play_demo()) {
    return HttpReply{409, "text/plain; charset=utf-8", "the demo is already playing\n"};
  }
  return json_reply(R"({"ok":true})");
}

}  // namespace purgatory::broker
