#include "load.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace broker_load {

using boost::system::error_code;

void Load::run(const std::function<void(bool warmup_point)>& sample_rss,
               std::function<void()> at_finish) {
  at_finish_ = std::move(at_finish);
  const auto start = Clock::now();
  const auto hard_deadline =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(o_.duration_s + 2 * o_.drain_s + 30));
  // Metadata first: it creates the topic, so no consumer ever sees UNKNOWN_TOPIC.
  setup_ = std::make_unique<Conn>(io_, "setup", failures_);
  setup_->connect(
      port_,
      [this] {
        pb::MetadataRequest m;
        m.topics = std::vector<std::string>{kTopic};
        setup_->send(m, kMetadataVersion, Kind::metadata);
      },
      [this](Kind, pb::ByteView, Clock::time_point) { start_load(); });

  // Once a second: the RSS sample, the warm-up point, the end of the load, the hard deadline.
  asio::steady_timer tick(io_);
  std::function<void()> on_tick = [&] {
    tick.expires_after(std::chrono::seconds(1));
    tick.async_wait([&](const error_code& ec) {
      if (ec) return;
      const double elapsed = std::chrono::duration<double>(Clock::now() - load_start_).count();
      const bool warm = started_ && !warmed_ && elapsed >= std::max(2.0, o_.duration_s / 4);
      if (warm) warmed_ = true;
      sample_rss(warm);
      if (started_ && !stopping_ && elapsed >= o_.duration_s) begin_drain();
      if (Clock::now() > hard_deadline) {
        failures_.add("hard deadline passed: giving up");
        return finish();
      }
      on_tick();
    });
  };
  on_tick();
  poll_timer_ = std::make_unique<asio::steady_timer>(io_);
  io_.run();
  elapsed_s_ = std::chrono::duration<double>(measured_end_ - load_start_).count();
}

void Load::start_load() {
  started_ = true;
  load_start_ = Clock::now();
  setup_->close();
  for (int i = 0; i < o_.connections; ++i) {
    auto& c =
        *consumers_.emplace_back(std::make_unique<Consumer>(io_, i, i % o_.partitions, failures_));
    c.conn.connect(
        port_, [this, &c] { fetch(c); },
        [this, &c](Kind, pb::ByteView p, Clock::time_point sent) { on_fetch(c, p, sent); });
  }
  for (int i = 0; i < o_.producers; ++i) {
    auto& p = *producers_.emplace_back(std::make_unique<Producer>(io_, i, failures_));
    p.conn.connect(
        port_, [this, &p] { produce_tick(p); },
        [this, &p](Kind, pb::ByteView b, Clock::time_point sent) { on_produce(p, b, sent); });
  }
}

void Load::begin_drain() {
  stopping_ = true;
  drain_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(o_.drain_s));
  for (auto& p : producers_)
    p->timer.cancel();
  poll_drain();
}

// Producers' last answers first, then every consumer reads to its partition's end.
void Load::poll_drain() {
  poll_timer_->expires_after(std::chrono::milliseconds(50));
  poll_timer_->async_wait([this](const error_code& ec) {
    if (ec) return;
    if (Clock::now() > drain_deadline_) {
      failures_.add("drain: not every request answered / record consumed within the drain time");
      return finish();
    }
    maybe_finish();
    if (!finished_) poll_drain();
  });
}

// Every producer stopped and got its last answer: the acked offsets are final.
bool Load::producers_drained() const {
  if (!stopping_) return false;
  return std::all_of(producers_.begin(), producers_.end(),
                     [](const auto& p) { return p->conn.outstanding() == 0; });
}

void Load::maybe_finish() {
  if (finished_ || !producers_drained()) return;
  bool all_done = true;
  for (const auto& c : consumers_) {
    if (c->done) continue;
    if (c->conn.outstanding() > 0 || c->next_offset < ledger_.acked_end(c->partition)) {
      all_done = false;
      continue;
    }
    c->done = true;  // at the end already, its last fetch answered: nothing more to send
  }
  if (all_done) finish();
}

void Load::finish() {
  finished_ = true;
  measured_end_ = Clock::now();
  at_finish_();
  io_.stop();
}

void Load::verify_and_print(long rss_warm, long rss_end, long rss_max) {
  std::uint64_t unanswered = 0;
  for (const auto& c : consumers_)
    unanswered += c->conn.outstanding();
  for (const auto& p : producers_)
    unanswered += p->conn.outstanding();
  if (unanswered > 0) failures_.add(fmt::format("{} request(s) never answered", unanswered));
  // Exactly once: the acked batches tile each partition's log, and match what was consumed.
  const std::uint64_t acked_records = ledger_.verify(failures_);
  for (const auto& c : consumers_) {
    const std::size_t end = ledger_.read_end(c->partition);
    if (static_cast<std::size_t>(c->next_offset) != end) {
      failures_.add(
          fmt::format("consumer {} stopped at offset {} of {}", c->index, c->next_offset, end));
    }
  }
  const double rps = static_cast<double>(stats_.responses) / elapsed_s_;
  fmt::print(
      "broker_load: {} consumer connections, {} producers, {} partitions, {:.1f} s under load\n",
      o_.connections, o_.producers, o_.partitions, elapsed_s_);
  fmt::print(
      "  requests answered: {} ({:.0f}/s): {} produce, {} fetch ({} empty: long poll expired)\n",
      stats_.responses, rps, stats_.produce_responses, stats_.fetch_responses,
      stats_.empty_fetches);
  fmt::print("  records: {} acked, {} consumed (every consumer of a partition reads all of it)\n",
             acked_records, stats_.records_consumed);
  fmt::print("  produce latency (acks={}):          {}\n", o_.acks, percentiles(stats_.produce_us));
  fmt::print("  fetch time to data (send->consume): {}\n", percentiles(stats_.time_to_data_us));
  fmt::print("  fetch response time (incl. wait):   {}\n", percentiles(stats_.fetch_us));
  const bool flat = rss_end <= rss_warm + std::max(rss_warm / 5, o_.rss_slack_mib * 1024);
  fmt::print("  broker RSS: {:.1f} MiB after warm-up, {:.1f} MiB at the end, {:.1f} MiB max: {}\n",
             rss_warm / 1024.0, rss_end / 1024.0, rss_max / 1024.0, flat ? "flat" : "GREW");
  if (!flat) {
    failures_.add(fmt::format("broker RSS grew past warm-up + max(20%, {} MiB)", o_.rss_slack_mib));
  }
}

}  // namespace broker_load
