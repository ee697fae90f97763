// --impl=ours: the library's DelayedOperationPurgatory, with a DelayedOperation per request
// whose callbacks record what the harness measures.

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "mode_parked.hpp"
#include "mode_rate.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory_under_test.hpp"
#include "stats.hpp"

namespace purgatory_bench {
namespace {

using std::chrono::nanoseconds;

class BenchOperation final : public purgatory::DelayedOperation {
 public:
  BenchOperation(nanoseconds timeout, Clock::time_point arrival, Clock::time_point completes_at,
                 Stats& stats)
      : DelayedOperation(timeout), arrival_(arrival), completes_at_(completes_at), stats_(stats) {}

 protected:
  bool try_complete() override { return Clock::now() >= completes_at_ && force_complete(); }
  void on_complete() override {
    if (outcome() == purgatory::Outcome::completed) {
      record_completed(stats_, arrival_, completes_at_);
    } else if (outcome() != purgatory::Outcome::expired) {
      stats_.resolved.fetch_add(1);  // shut down
    }
  }
  void on_expiration() override {
    stats_.expiry.record(Clock::now() - arrival_);
    stats_.resolved.fetch_add(1);
  }

 private:
  const Clock::time_point arrival_;
  const Clock::time_point completes_at_;
  Stats& stats_;
};

class Ours {
 public:
  using Handle = purgatory::OperationRef;
  explicit Ours(const Config& config) : purgatory_(options(config)) {}

  static purgatory::PurgatoryOptions options(const Config& config) {
    purgatory::PurgatoryOptions o;
    o.name = "bench";
    o.shards = config.shards;
    // inline: expiries run on the reaper thread, as the naive one runs them on its io thread.
    if (config.executor == "inline")
      o.timer.executor = std::make_shared<purgatory::InlineExecutor>();
    return o;
  }
  Handle add(nanoseconds timeout, Clock::time_point arrival, Clock::time_point completes_at,
             const std::vector<int>& keys, Stats& stats) {
    Handle op(new BenchOperation(timeout, arrival, completes_at, stats));
    purgatory_.try_complete_else_watch(op, std::span<const int>(keys));
    return op;
  }
  static void complete(const Handle& op) { op->force_complete(); }
  std::size_t watched() const { return purgatory_.watched(); }
  std::size_t delayed() const { return purgatory_.num_delayed(); }
  void shutdown() { purgatory_.shutdown(); }

  // --parked: a lambda operation whose condition never holds (it waits for its timeout).
  Handle park(nanoseconds timeout, int key, Stats& stats) {
    Handle op = purgatory::make_operation(
        timeout, [ready = &never_ready_] { return ready->load(std::memory_order_relaxed); },
        [s = &stats](purgatory::Outcome) { s->resolved.fetch_add(1); });
    purgatory_.try_complete_else_watch(op, {key});
    return op;
  }
  static std::string parked_object() {
    return fmt::format("{}-byte operation with 16 bytes of captures",
                       sizeof(purgatory::DelayedOperation));
  }

 private:
  purgatory::DelayedOperationPurgatory<int> purgatory_;
  std::atomic<bool> never_ready_{false};
};

}  // namespace

const Implementation& ours_implementation() {
  static constexpr Implementation kOurs{"ours", &run_rate<Ours>, &park<Ours>, nullptr};
  return kOurs;
}

}  // namespace purgatory_bench
