// purgatory_bench: Kafka's TestPurgatoryPerformance, against a naive purgatory.
//
// Requests arrive as a Poisson process at --rate per second; each watches --keys random keys out
// of --key-space-size and draws a completion latency from a log-normal distribution given by its
// median (--pct50) and 75th percentile (--pct75). A request whose latency is below --timeout is
// completed at that time by a completer thread (force_complete, as Kafka's harness does); the
// others expire. Prints the achieved rate, the process CPU time, the peak RSS and the completion
// and expiry latency percentiles, and every --sample seconds a line with the purgatory size, the
// requests arrived and resolved (completed or expired) so far and the current RSS (VmRSS).
//
//   purgatory_bench --impl=both --num 1000000 --rate 100000 --pct50 20 --pct75 50
//                   --timeout 100 --keys 3 --key-space-size 1000   (one command line)
//
// Soak: --duration S runs at --rate for S seconds instead of --num requests, then prints a summary
// (RSS after the warm-up, the first sample at or after min(60 s, 10% of S), against RSS at the end
// of the arrivals; purgatory size; every request resolved exactly once) and `soak: PASS` or
// `soak: FAIL (reason)`, exiting 1 on failure: when a request is not resolved exactly once, one
// completes early, the backlog does not drain within 60 s, or RSS at the end exceeds RSS after
// the warm-up by more than 10% + 1 MiB. `--soak` is the preset for the reliability figures:
//
//   purgatory_bench --soak    (= --impl=ours --duration 600 --rate 100000 --sample 10, with the
//                              default latency mix; any of these given explicitly wins)
//
// --csv FILE also writes the samples as time_s,arrived,resolved,pending,rss_mib,watched,impl
// (pending is the purgatory's delayed operations, watched its watch-list entries).
//
// --impl takes a comma list run one after the other in one process: `--impl=ours,null` also prints
// our CPU per request minus the harness's. Every run prints CPU per request, the arriving threads'
// own CPU per request and the heap allocations per request. --threads N: N arriving threads, each
// with its own completer thread, share one purgatory (each issues --rate/N per second).
//
// --impl=naive is the purgatory written the obvious way: one mutex, an unordered_multimap from key
// to operation, one boost::asio::steady_timer per operation on an io_context run by one thread.
//
// --impl=lean is not a purgatory but a lower bound: the same per-request work (watch lists,
// a wheel, one decision, unlinks at completion) with none of a purgatory's guarantees (see the
// class). `--impl=ours,lean,null` prints what ours and lean each cost over the harness.
//
// Memory: --parked N parks N requests that never complete, each on one key of --key-space-size
// with --timeout (60 s unless given), this process holding a reference to each (as a server holds
// its pending requests), and prints how much the process's RSS grew per parked request. Each
// implementation of --impl runs in a child process of its own, so that none reuses memory another
// freed. Ours parks make_operation() lambdas capturing two pointers (16 bytes, as a long-poll's
// request and connection); lean and naive park their own request objects (24 bytes of payload).
// The references' own array is allocated and touched before the first reading: it is the
// caller's memory, the same for every implementation.
//
//   purgatory_bench --parked 1000000 --impl=ours,lean,naive


#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/latency_histogram.hpp"
#include "purgatory/timer/detail/task_pool.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using purgatory::LatencyHistogram;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

// Heap allocations, counted by the operator new below: per thread (no shared counter on the hot
// path), folded into a total when the thread ends.
std::atomic<std::uint64_t> g_allocations{0};
struct AllocationCount {
  std::uint64_t n = 0;
  ~AllocationCount() { g_allocations.fetch_add(n, std::memory_order_relaxed); }
};
thread_local AllocationCount t_allocations;

// Those of ended threads plus this thread's (a run's other threads end within the run).
std::uint64_t allocations_so_far() {
  return g_allocations.load(std::memory_order_relaxed) + t_allocations.n;
}

// "ours,null" -> {"ours", "null"}; "both" stands for ours,naive.
std::vector<std::string> impl_list(const std::string& list) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (from <= list.size()) {
    const std::size_t comma = std::min(list.find(',', from), list.size());
    const std::string name = list.substr(from, comma - from);
    if (name == "both") {
      out.insert(out.end(), {"ours", "naive"});
    } else if (!name.empty()) {
      out.push_back(name);
    }
    from = comma + 1;
  }
  return out;
}

struct Config {
  long num = 1'000'000;
  double rate = 100'000;
  double pct50 = 20;
  double pct75 = 50;
  long timeout_ms = 100;
  int keys = 3;
  int key_space = 1000;
  std::size_t shards = 16;
  double sample_s = 1.0;
  std::string impl = "ours";
  std::string executor = "inline";
  long parked = 0;        // > 0: the memory mode (--parked)
  int threads = 1;        // arriving threads, each with its own completer
  double duration_s = 0;  // > 0: arrivals for this long instead of `num` requests (a soak)
  std::string csv;
};

// A soak fails when RSS at the end of the arrivals exceeds RSS after the warm-up by more than this.
constexpr double kRssGrowthLimit = 0.10;
constexpr double kRssSlackMiB = 1.0;
// A soak's backlog must drain within this after the last arrival.
constexpr auto kDrainLimit = std::chrono::seconds(60);

// What every run measures; shared by the implementation's callbacks.
struct Stats {
  LatencyHistogram completion;  // arrival -> on_complete, for requests completed in time
  LatencyHistogram expiry;      // arrival -> on_expiration
  LatencyHistogram lateness;    // intended completion time -> on_complete
  std::atomic<long> early{0};   // completed before the intended time (must stay 0)
  std::atomic<long> resolved{0};
};

// A request completed in time: what every implementation records for it (the harness's work).
void record_completed(Stats& stats, Clock::time_point arrival, Clock::time_point completes_at) {
  const auto now = Clock::now();
  stats.completion.record(now - arrival);
  stats.lateness.record(now - completes_at);
  if (now < completes_at) stats.early.fetch_add(1);
  stats.resolved.fetch_add(1);
}

double cpu_seconds(int who = RUSAGE_SELF) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stol(line.substr(prefix.size()));
  }
  return -1;
}

double rss_mib() {
  return static_cast<double>(status_kib("VmRSS")) / 1024.0;
}

// Resets VmHWM so that each implementation's peak is its own.
void reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

// Kafka's LogNormalDistribution: the median and the 75th percentile fix mu and sigma.
class LatencySampler {
 public:
  LatencySampler(double pct50, double pct75, std::uint64_t seed)
      : mu_(std::log(pct50)), sigma_((std::log(pct75) - mu_) / 0.674489750196), rng_(seed) {}
  double next_ms() { return std::exp(mu_ + sigma_ * normal_(rng_)); }

 private:
  double mu_;
  double sigma_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
};

// Whether the completer completes the request (its latency is below the timeout), else it expires.
bool completes_in_time(Clock::time_point arrival, Clock::time_point completes_at,
                       nanoseconds timeout) {
  return completes_at - arrival < timeout;
}

// Completes requests when their latency has passed: a heap by due time, fed in batches.
template <class Handle, class CompleteFn>
class Completer {
 public:
  explicit Completer(CompleteFn complete) : complete_(std::move(complete)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Completer() { stop(); }

  // Buffers on the caller's side; flush() hands a whole batch over under one lock.
  void add(Clock::time_point due, Handle handle) { local_.push_back({due, std::move(handle)}); }
  void flush() {
    if (local_.empty()) return;
    const std::lock_guard<std::mutex> lock(mu_);
    if (incoming_.empty()) {
      incoming_.swap(local_);
    } else {
      for (Item& item : local_)
        incoming_.push_back(std::move(item));
      local_.clear();
    }
  }
  void stop() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    thread_.join();
  }

 private:
  struct Item {
    Clock::time_point due;
    Handle handle;
    bool operator>(const Item& o) const { return due > o.due; }
  };

  void loop() {
    std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
    std::vector<Item> batch;
    for (;;) {
      {
        const std::lock_guard<std::mutex> lock(mu_);
        batch.swap(incoming_);
      }
      for (Item& item : batch)
        heap.push(std::move(item));
      batch.clear();
      const auto now = Clock::now();
      while (!heap.empty() && heap.top().due <= now) {
        complete_(heap.top().handle);
        heap.pop();
      }
      if (stopping_.load() && heap.empty()) {
        const std::lock_guard<std::mutex> lock(mu_);
        if (incoming_.empty()) return;
      }
      // Naps of 0.5 to 1 ms: latencies are given in ms, and waking for every due time (up to
      // 100k times a second) would cost more CPU than either purgatory.
      auto until = now + milliseconds(1);
      if (!heap.empty()) until = std::clamp(heap.top().due, now + microseconds(500), until);
      std::this_thread::sleep_until(until);
    }
  }

  CompleteFn complete_;
  std::mutex mu_;
  std::vector<Item> incoming_;  // guarded by mu_
  std::vector<Item> local_;     // the generator's batch
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// ---- ours -------------------------------------------------------------------------------------

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

// ---- naive ------------------------------------------------------------------------------------

class Naive {
 public:
  struct Op {
    Op(boost::asio::io_context& io, std::vector<int> k, Clock::time_point a, Clock::time_point c,
       Stats& s)
        : timer(io), keys(std::move(k)), arrival(a), completes_at(c), stats(s) {}
    boost::asio::steady_timer timer;
    std::vector<int> keys;
    Clock::time_point arrival;
    Clock::time_point completes_at;
    Stats& stats;
    bool done = false;  // guarded by Naive::mu_
  };
  using Handle = std::shared_ptr<Op>;

  explicit Naive(const Config&) : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~Naive() { shutdown(); }

  Handle add(nanoseconds timeout, Clock::time_point arrival, Clock::time_point completes_at,
             const std::vector<int>& keys, Stats& stats) {
    auto op = std::make_shared<Op>(io_, keys, arrival, completes_at, stats);
    const std::lock_guard<std::mutex> lock(mu_);
    for (int key : keys)
      watchers_.emplace(key, op);
    op->timer.expires_after(timeout);
    op->timer.async_wait([this, op](const boost::system::error_code& ec) {
      if (!ec) expire(op);
    });
    return op;
  }
  void complete(const Handle& op) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (op->done) return;
      op->done = true;
      unwatch(*op);
    }
    // Asio timers are not thread-safe objects: cancel on the thread that runs the io_context.
    boost::asio::post(io_, [op] { op->timer.cancel(); });
    record_completed(op->stats, op->arrival, op->completes_at);
  }
  std::size_t watched() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return watchers_.size();
  }
  std::size_t delayed() const { return watched(); }
  void shutdown() {
    if (!thread_.joinable()) return;
    work_.reset();
    io_.stop();
    thread_.join();
  }

  // --parked: a request that will not complete before its timeout.
  Handle park(nanoseconds timeout, int key, Stats& stats) {
    const auto now = Clock::now();
    return add(timeout, now, now + std::chrono::hours(1), {key}, stats);
  }
  static std::string parked_object() {
    return fmt::format("{}-byte Op in a shared_ptr, a 1-key vector, a multimap node", sizeof(Op));
  }

 private:
  void expire(const Handle& op) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (op->done) return;
      op->done = true;
      unwatch(*op);
    }
    op->stats.expiry.record(Clock::now() - op->arrival);
    op->stats.resolved.fetch_add(1);
  }
  void unwatch(const Op& op) {
    for (int key : op.keys) {
      auto [it, end] = watchers_.equal_range(key);
      for (; it != end; ++it) {
        if (it->second.get() == &op) {
          watchers_.erase(it);
          break;
        }
      }
    }
  }

  mutable std::mutex mu_;
  std::unordered_multimap<int, Handle> watchers_;  // guarded by mu_
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

// ---- lean: a lower bound for this workload, not a purgatory -----------------------------------

// The least work any purgatory must do here, written as plainly as it can be: an operation of
// two and a half cache lines (from the same pool as ours) is linked on each key's intrusive list
// under a shard mutex (16 shards, as ours), scheduled on a wheel of 1 ms buckets under one mutex,
// driven by its own thread, and decided by one compare-and-swap; its completion leaves the wheel
// and every list at once, as ours does. What it leaves out is what a purgatory owes its users: no
// lock around the completion check (so no Kafka-style checks by key), no metrics or gauges, no
// error reporting, no shutdown that resolves what is still pending, at most kMaxKeys keys and
// kMaxTimeoutMs, one wheel lock for every thread. Ours minus lean is the price of those on this
// machine; lean minus null bounds what any design doing this work could cost.
class Lean {
 public:
  static constexpr long kMaxTimeoutMs = 250;  // the wheel is 256 buckets of 1 ms
  static constexpr int kMaxKeys = 4;

  struct Link {
    Link* prev = this;
    Link* next = this;
  };
  struct KeyList;
  struct KeyNode {
    Link link;
    KeyList* list = nullptr;
  };
  struct KeyList {
    Link head;
    int key = 0;
    std::size_t shard = 0;
  };
  enum : int { kPending, kCompleted, kExpired, kShutDown };
  struct Op {
    std::atomic<int> refs{2};  // the caller's handle and the wheel's
    std::atomic<int> state{kPending};
    Link wheel_link;
    std::int64_t bucket = -1;  // guarded by the wheel's mutex; -1: not in the wheel
    int num_keys = 0;
    KeyNode nodes[kMaxKeys];
    Clock::time_point arrival;
    Clock::time_point completes_at;
    Stats* stats = nullptr;

    static void* operator new(std::size_t size) { return purgatory::detail::pool_allocate(size); }
    static void operator delete(void* block, std::size_t size) noexcept {
      purgatory::detail::pool_deallocate(block, size);
    }
  };
  static void release(Op* op) noexcept {
    if (op->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete op;
  }
  // The caller's reference (move-only).
  class Handle {
   public:
    Handle() = default;
    explicit Handle(Op* op) noexcept : op_(op) {}
    Handle(Handle&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
    Handle& operator=(Handle&& other) noexcept {
      if (this != &other) {
        if (op_ != nullptr) release(op_);
        op_ = std::exchange(other.op_, nullptr);
      }
      return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() {
      if (op_ != nullptr) release(op_);
    }
    [[nodiscard]] Op* get() const noexcept { return op_; }

   private:
    Op* op_ = nullptr;
  };

  explicit Lean(const Config&) : start_(Clock::now()), reaper_([this] { reap(); }) {}
  ~Lean() { shutdown(); }
  Lean(const Lean&) = delete;
  Lean& operator=(const Lean&) = delete;

  Handle add(nanoseconds timeout, Clock::time_point arrival, Clock::time_point completes_at,
             const std::vector<int>& keys, Stats& stats) {
    Handle handle(new Op);
    Op* op = handle.get();
    op->arrival = arrival;
    op->completes_at = completes_at;
    op->stats = &stats;
    // The check before watching and the one after, as every purgatory makes them.
    if (Clock::now() >= completes_at) {
      op->state.store(kCompleted, std::memory_order_relaxed);
      record_completion(*op);
      release(op);  // the wheel's reference: it never enters the wheel
      return handle;
    }
    op->num_keys = static_cast<int>(keys.size());  // at most kMaxKeys (checked by main)
    for (int i = 0; i < op->num_keys; ++i)
      watch(keys[static_cast<std::size_t>(i)], op->nodes[i]);
    const auto now = Clock::now();
    if (now >= completes_at) {
      if (decide(*op, kCompleted)) {
        unwatch(*op);
        record_completion(*op);
        release(op);
      }
      return handle;
    }
    const std::lock_guard<std::mutex> lock(wheel_mu_);
    // A bucket the reaper has passed is due already: the next one it takes.
    const std::int64_t due = std::max(ms_since_start(now + timeout, /*round_up=*/true), next_);
    op->bucket = due;
    link_back(wheel_[static_cast<std::size_t>(due) % kBuckets], op->wheel_link);
    return handle;
  }

  void complete(const Handle& handle) {
    Op* op = handle.get();
    if (!decide(*op, kCompleted)) return;
    bool in_wheel = false;
    {
      const std::lock_guard<std::mutex> lock(wheel_mu_);
      if (op->bucket != -1) {
        unlink(op->wheel_link);
        op->bucket = -1;
        in_wheel = true;
      }
    }
    unwatch(*op);
    record_completion(*op);
    if (in_wheel) release(op);  // else the reaper holds it and drops it
  }

  static std::size_t watched() { return 0; }  // lean keeps no gauges
  static std::size_t delayed() { return 0; }

  // --parked: a request that will not complete before its timeout. (A timeout past the ring's
  // 256 ms takes laps: correct, and only its reaper pays.)
  Handle park(nanoseconds timeout, int key, Stats& stats) {
    const auto now = Clock::now();
    return add(timeout, now, now + std::chrono::hours(1), {key}, stats);
  }
  static std::string parked_object() { return fmt::format("{}-byte Op", sizeof(Op)); }

  // Stops the reaper; what is still in the wheel is shut down, unresolved.
  void shutdown() {
    if (!reaper_.joinable()) return;
    stopping_.store(true);
    reaper_.join();
    for (Link& head : wheel_) {
      while (head.next != &head) {
        Op* op = op_of(head.next);
        unlink(op->wheel_link);
        op->bucket = -1;
        if (decide(*op, kShutDown)) unwatch(*op);
        release(op);
      }
    }
  }

 private:
  static constexpr std::size_t kBuckets = 256;
  static constexpr std::size_t kShards = 16;
  struct alignas(64) Shard {
    std::mutex mu;
    std::unordered_map<int, KeyList*> lists;  // guarded by mu; a list lives while non-empty
  };

  static void link_back(Link& head, Link& node) noexcept {
    node.prev = head.prev;
    node.next = &head;
    head.prev->next = &node;
    head.prev = &node;
  }
  static void unlink(Link& node) noexcept {
    node.prev->next = node.next;
    node.next->prev = node.prev;
    node.prev = node.next = &node;
  }
  static Op* op_of(Link* wheel_link) noexcept {
    return reinterpret_cast<Op*>(reinterpret_cast<char*>(wheel_link) - offsetof(Op, wheel_link));
  }
  static bool decide(Op& op, int outcome) noexcept {
    int expected = kPending;
    return op.state.compare_exchange_strong(expected, outcome, std::memory_order_acq_rel);
  }
  static void record_completion(const Op& op) {
    record_completed(*op.stats, op.arrival, op.completes_at);
  }
  std::int64_t ms_since_start(Clock::time_point t, bool round_up) const {
    const std::int64_t ns = duration_cast<nanoseconds>(t - start_).count();
    return (ns + (round_up ? 999'999 : 0)) / 1'000'000;
  }

  void watch(int key, KeyNode& node) {
    const std::size_t index = (std::hash<int>{}(key)*0x9E3779B97F4A7C15ULL) >> 60;
    Shard& shard = shards_[index];
    const std::lock_guard<std::mutex> lock(shard.mu);
    auto [it, inserted] = shard.lists.try_emplace(key, nullptr);
    if (inserted) it->second = new KeyList{{}, key, index};
    node.list = it->second;
    link_back(it->second->head, node.link);
  }
  void unwatch(Op& op) noexcept {
    for (int i = 0; i < op.num_keys; ++i) {
      KeyList* list = op.nodes[i].list;
      Shard& shard = shards_[list->shard];
      const std::lock_guard<std::mutex> lock(shard.mu);
      unlink(op.nodes[i].link);
      if (list->head.next == &list->head) {
        shard.lists.erase(list->key);
        delete list;
      }
    }
  }

  // Sleeps to each 1 ms boundary and expires the buckets passed.
  void reap() {
    std::vector<Op*> due;
    std::int64_t next = 0;
    while (!stopping_.load()) {
      const std::int64_t now = ms_since_start(Clock::now(), false);
      {
        const std::lock_guard<std::mutex> lock(wheel_mu_);
        for (; next_ <= now; ++next_) {
          Link& head = wheel_[static_cast<std::size_t>(next_) % kBuckets];
          for (Link* l = head.next; l != &head;) {
            Op* op = op_of(l);
            l = l->next;
            if (op->bucket > next_) continue;  // a later lap of the ring
            unlink(op->wheel_link);
            op->bucket = -1;
            due.push_back(op);
          }
        }
      }
      for (Op* op : due) {
        if (decide(*op, kExpired)) {
          unwatch(*op);
          op->stats->expiry.record(Clock::now() - op->arrival);
          op->stats->resolved.fetch_add(1);
        }
        release(op);
      }
      due.clear();
      {
        const std::lock_guard<std::mutex> lock(wheel_mu_);
        next = next_;
      }
      std::this_thread::sleep_until(start_ + milliseconds(next));
    }
  }

  Shard shards_[kShards];
  std::mutex wheel_mu_;
  Link wheel_[kBuckets];  // guarded by wheel_mu_
  const Clock::time_point start_;
  std::int64_t next_ = 0;  // guarded by wheel_mu_: the next bucket (ms since start_) to expire
  std::atomic<bool> stopping_{false};
  std::thread reaper_;
};

// ---- null: the harness alone (its CPU cost is in both figures above) -----------------------

// No purgatory, but the measurement work of BenchOperation's callbacks (a clock read, the
// histogram records, the resolved count): those callbacks are the harness's, so ours minus null
// is the purgatory's own cost. A request that will not be completed "expires" at once.
class Null {
 public:
  struct Handle {
    Clock::time_point arrival;
    Clock::time_point completes_at;
    Stats* stats = nullptr;
  };
  explicit Null(const Config&) {}
  Handle add(nanoseconds timeout, Clock::time_point arrival, Clock::time_point completes_at,
             const std::vector<int>&, Stats& stats) {
    if (!completes_in_time(arrival, completes_at, timeout)) {
      stats.expiry.record(Clock::now() - arrival);
      stats.resolved.fetch_add(1);
    }
    return {arrival, completes_at, &stats};
  }
  static void complete(const Handle& h) { record_completed(*h.stats, h.arrival, h.completes_at); }
  static std::size_t watched() { return 0; }
  static std::size_t delayed() { return 0; }
  static void shutdown() {}
};

// ---- the harness ------------------------------------------------------------------------------

struct Result {
  double cpu_s = 0;
  double elapsed_s = 0;
  double achieved_rate = 0;
  long peak_rss_kib = 0;
  long requests = 0;
  double arriving_cpu_s = 0;  // the arriving threads' own CPU time (RUSAGE_THREAD)
  double allocations = 0;     // heap allocations (operator new) in the process during the run
  std::string soak_failure;   // why a timed run failed its soak checks; empty if it passed
};

// One line of the sampler's output.
struct Sample {
  double t_s = 0;
  long arrived = 0;
  long resolved = 0;
  std::size_t watched = 0;
  std::size_t delayed = 0;
  double rss_mib = 0;
  bool under_load = false;  // taken before the last arrival
};

// What a timed run checks at its end, from its samples and counters.
struct SoakEnd {
  long arrived = 0;
  long resolved = 0;  // after shutdown: every callback has run
  long completed = 0;
  long expired = 0;
  long early = 0;
  bool drained = false;
  double end_t_s = 0;  // the last arrival
  double end_rss_mib = 0;
};

// Prints the soak summary; returns the reasons it fails, "" if it passes.
std::string soak_summary(const Config& config, const std::vector<Sample>& samples,
                         const SoakEnd& end, const Result& result) {
  std::vector<std::string> failures;
  if (!end.drained) {
    failures.push_back(fmt::format("{} requests unresolved {} s after the last arrival",
                                   end.arrived - end.resolved, kDrainLimit.count()));
  } else if (end.resolved != end.arrived) {
    failures.push_back(
        fmt::format("exactly-once: {} resolved for {} arrived", end.resolved, end.arrived));
  }
  if (end.early != 0) failures.push_back(fmt::format("{} completed early", end.early));

  const double warmup_s = std::min(60.0, 0.1 * config.duration_s);
  const Sample* warm = nullptr;
  double max_rss = end.end_rss_mib;
  std::size_t max_watched = 0;
  std::size_t max_delayed = 0;
  double sum_watched = 0;
  double sum_delayed = 0;
  int loaded = 0;
  for (const Sample& s : samples) {
    max_rss = std::max(max_rss, s.rss_mib);
    max_watched = std::max(max_watched, s.watched);
    max_delayed = std::max(max_delayed, s.delayed);
    if (!s.under_load) continue;
    if (warm == nullptr && s.t_s >= warmup_s) warm = &s;
    sum_watched += static_cast<double>(s.watched);
    sum_delayed += static_cast<double>(s.delayed);
    ++loaded;
  }

  fmt::print("  soak summary:\n");
  fmt::print("    requests: {} arrived, {} resolved ({} completed, {} expired), {} early\n",
             end.arrived, end.resolved, end.completed, end.expired, end.early);
  if (warm != nullptr) {
    fmt::print(
        "    RSS: {:.1f} MiB after warm-up (t={:.0f} s), {:.1f} MiB at end (t={:.0f} s), "
        "max {:.1f} MiB\n",
        warm->rss_mib, warm->t_s, end.end_rss_mib, end.end_t_s, max_rss);
    const double limit = warm->rss_mib * (1.0 + kRssGrowthLimit) + kRssSlackMiB;
    if (end.end_rss_mib > limit) {
      failures.push_back(fmt::format(
          "RSS grew from {:.1f} MiB after warm-up to {:.1f} MiB at end, limit {:.1f} MiB",
          warm->rss_mib, end.end_rss_mib, limit));
    }
  } else {
    fmt::print("    RSS: {:.1f} MiB at end (t={:.0f} s), max {:.1f} MiB\n", end.end_rss_mib,
               end.end_t_s, max_rss);
    failures.push_back(fmt::format("no sample under load after the {:g} s warm-up (--sample {})",
                                   warmup_s, config.sample_s));
  }
  if (loaded > 0) {
    fmt::print(
        "    purgatory size: max watched {} delayed {}, mean watched {:.0f} delayed {:.0f} "
        "({} samples under load)\n",
        max_watched, max_delayed, sum_watched / loaded, sum_delayed / loaded, loaded);
  }
  fmt::print("    rate {:.0f}/s (target {:.0f}/s), CPU {:.2f} s ({:.0f}% of one core)\n",
             result.achieved_rate, config.rate, result.cpu_s,
             100.0 * result.cpu_s / result.elapsed_s);

  std::string reasons;
  for (const std::string& f : failures)
    reasons += (reasons.empty() ? "" : "; ") + f;
  return reasons;
}

std::string ms(nanoseconds d) {
  return fmt::format("{:.2f}", static_cast<double>(d.count()) / 1e6);
}

void print_latency(const char* what, const LatencyHistogram& h) {
  const auto s = h.summary();
  fmt::print("  {} latency (ms, {} samples): p50 {} p75 {} p99 {} p99.9 {} max {}\n", what, s.count,
             ms(s.p50), ms(h.percentile(0.75)), ms(s.p99), ms(s.p999), ms(s.max));
}

template <class Impl>
Result run(const Config& config, const char* label, std::FILE* csv) {
  const bool timed = config.duration_s > 0;
  fmt::print(
      "== {}: {} at {:.0f}/s, latency pct50 {} ms pct75 {} ms, timeout {} ms, {} keys of {}\n",
      label,
      timed ? fmt::format("{} s of requests", config.duration_s)
            : fmt::format("{} requests", config.num),
      config.rate, config.pct50, config.pct75, config.timeout_ms, config.keys, config.key_space);
  std::fflush(stdout);
  reset_peak_rss();
  Stats stats;
  const std::uint64_t allocations0 = allocations_so_far();
  const double cpu0 = cpu_seconds();
  const auto start = Clock::now();
  Result result;
  SoakEnd end;
  std::vector<Sample> samples;  // the sampler's, read once it is joined
  {
    Impl impl(config);
    std::atomic<bool> sampling{true};
    std::atomic<long> arrived{0};  // published by the arriving threads once per batch
    std::atomic<bool> under_load{true};
    std::thread sampler([&] {
      const auto period =
          duration_cast<nanoseconds>(std::chrono::duration<double>(config.sample_s));
      auto next = start + period;
      while (sampling.load()) {
        std::this_thread::sleep_until(std::min(next, Clock::now() + milliseconds(20)));
        if (Clock::now() < next) continue;
        Sample s;
        s.under_load = under_load.load();
        s.t_s = std::chrono::duration<double>(Clock::now() - start).count();
        s.arrived = arrived.load(std::memory_order_relaxed);
        s.resolved = stats.resolved.load(std::memory_order_relaxed);
        s.watched = impl.watched();
        s.delayed = impl.delayed();
        s.rss_mib = rss_mib();
        fmt::print(
            "  t={:6.2f}s purgatory size: watched {} delayed {}, arrived {} resolved {}, RSS "
            "{:.1f} MiB\n",
            s.t_s, s.watched, s.delayed, s.arrived, s.resolved, s.rss_mib);
        std::fflush(stdout);
        if (csv != nullptr) {
          fmt::print(csv, "{:.2f},{},{},{},{:.2f},{},{}\n", s.t_s, s.arrived, s.resolved, s.delayed,
                     s.rss_mib, s.watched, label);
          std::fflush(csv);
        }
        samples.push_back(s);
        next += period;
      }
    });

    // The arriving threads: each issues its share of the requests (rate / threads, Poisson) with
    // its own random streams and hands the ones that complete in time to its own completer.
    const auto generate = [&](int index, long share, double rate, long& issued,
                              Clock::time_point& last, double& cpu) {
      const double cpu_start = cpu_seconds(RUSAGE_THREAD);
      Completer<typename Impl::Handle, std::function<void(const typename Impl::Handle&)>> completer(
          [&impl](const typename Impl::Handle& h) { impl.complete(h); });
      const auto seed = static_cast<std::uint64_t>(index) * 1000;
      std::mt19937_64 rng(1 + seed);
      std::exponential_distribution<double> gap(rate);
      std::uniform_int_distribution<int> key_dist(0, config.key_space - 1);
      LatencySampler latency(config.pct50, config.pct75, 2 + seed);
      const nanoseconds timeout = milliseconds(config.timeout_ms);
      std::vector<int> keys(static_cast<std::size_t>(config.keys));
      double arrival_s = 0;
      long i = 0;
      const auto more = [&] { return timed ? arrival_s < config.duration_s : i < share; };
      last = start;
      while (more()) {
        // Issue every request due by now in one batch, then sleep until the next one is due: a
        // sleep per request could not sustain 100k/s.
        const auto now = Clock::now();
        const auto next_due =
            start + duration_cast<nanoseconds>(std::chrono::duration<double>(arrival_s));
        if (next_due > now) {
          // At least 1 ms per nap: at 100k/s that is ~100 arrivals per batch, and the generator
          // wakes 1000 times a second instead of once per request.
          std::this_thread::sleep_until(std::max(next_due, now + milliseconds(1)));
          continue;
        }
        long batch = 0;
        while (more()) {
          const auto due =
              start + duration_cast<nanoseconds>(std::chrono::duration<double>(arrival_s));
          if (due > now) break;
          const double latency_ms = latency.next_ms();
          const auto completes_at =
              due +
              duration_cast<nanoseconds>(std::chrono::duration<double, std::milli>(latency_ms));
          for (int& k : keys)
            k = key_dist(rng);
          auto handle = impl.add(timeout, due, completes_at, keys, stats);
          if (completes_in_time(due, completes_at, timeout)) {
            completer.add(completes_at, std::move(handle));
          }
          arrival_s += gap(rng);
          ++i;
          ++batch;
        }
        completer.flush();
        arrived.fetch_add(batch, std::memory_order_relaxed);
        last = Clock::now();
      }
      issued = i;
      cpu = cpu_seconds(RUSAGE_THREAD) - cpu_start;  // before waiting for its completer
      // The completer finishes what it holds before the thread ends (its destructor).
    };
    const int threads = config.threads;
    std::vector<long> issued(static_cast<std::size_t>(threads), 0);
    std::vector<Clock::time_point> last(static_cast<std::size_t>(threads), start);
    std::vector<double> arriving_cpu(static_cast<std::size_t>(threads), 0.0);
    {
      std::vector<std::thread> others;
      for (int t = 1; t < threads; ++t) {
        const long share = config.num / threads;
        others.emplace_back([&, t, share] {
          const auto u = static_cast<std::size_t>(t);
          generate(t, share, config.rate / threads, issued[u], last[u], arriving_cpu[u]);
        });
      }
      // This thread is the first arriving thread (the only one by default).
      generate(0, config.num - (config.num / threads) * (threads - 1), config.rate / threads,
               issued[0], last[0], arriving_cpu[0]);
      for (std::thread& t : others)
        t.join();
    }
    long i = 0;
    for (const long n : issued)
      i += n;
    const auto last_issue = *std::max_element(last.begin(), last.end());
    for (const double c : arriving_cpu)
      result.arriving_cpu_s += c;
    const double issue_s = std::chrono::duration<double>(last_issue - start).count();
    result.achieved_rate = static_cast<double>(i) / issue_s;
    end.arrived = i;
    end.end_t_s = issue_s;
    end.end_rss_mib = rss_mib();
    under_load = false;

    // Without --duration, waits however long the backlog takes (scripts/bench-report bounds it).
    end.drained = true;
    while (stats.resolved.load() < i) {
      if (timed && Clock::now() - last_issue > kDrainLimit) {
        end.drained = false;
        break;
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
    result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
    sampling = false;
    sampler.join();
    impl.shutdown();
  }
  result.cpu_s = cpu_seconds() - cpu0;
  result.peak_rss_kib = status_kib("VmHWM");
  result.requests = end.arrived;
  result.allocations = static_cast<double>(allocations_so_far() - allocations0);

  fmt::print("  target rate {:.0f}/s, achieved rate {:.0f}/s ({:+.1f}%)\n", config.rate,
             result.achieved_rate, 100.0 * (result.achieved_rate / config.rate - 1.0));
  fmt::print("  elapsed {:.2f} s, process CPU time {:.2f} s ({:.0f}% of one core)\n",
             result.elapsed_s, result.cpu_s, 100.0 * result.cpu_s / result.elapsed_s);
  fmt::print("  peak RSS {:.1f} MiB\n", static_cast<double>(result.peak_rss_kib) / 1024.0);
  const auto requests = static_cast<double>(std::max(result.requests, 1L));
  fmt::print(
      "  CPU per request {:.3f} us (arriving threads {:.3f} us), heap allocations per request "
      "{:.3f}\n",
      1e6 * result.cpu_s / requests, 1e6 * result.arriving_cpu_s / requests,
      result.allocations / requests);
  print_latency("completion", stats.completion);
  print_latency("completion lateness", stats.lateness);
  print_latency("expiry", stats.expiry);
  if (stats.early.load() != 0) fmt::print("  ERROR: {} completed early\n", stats.early.load());
  if (timed) {
    end.resolved = stats.resolved.load();
    end.completed = static_cast<long>(stats.completion.count());
    end.expired = static_cast<long>(stats.expiry.count());
    end.early = stats.early.load();
    result.soak_failure = soak_summary(config, samples, end, result);
  }
  std::fflush(stdout);
  return result;
}

// --parked: parks config.parked requests and returns the RSS growth per request, in bytes.
template <class Impl>
double park(const Config& config, const char* label) {
  Stats stats;
  const auto n = static_cast<std::size_t>(config.parked);
  const nanoseconds timeout = milliseconds(config.timeout_ms);
  double per_request = 0;
  {
    Impl impl(config);
    std::vector<typename Impl::Handle> handles(n);  // value-initialized: its pages are resident
    const long before_kib = status_kib("VmRSS");
    const auto start = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      handles[i] = impl.park(
          timeout, static_cast<int>(i % static_cast<std::size_t>(config.key_space)), stats);
    }
    const double park_s = std::chrono::duration<double>(Clock::now() - start).count();
    const long after_kib = status_kib("VmRSS");
    per_request = 1024.0 * static_cast<double>(after_kib - before_kib) / static_cast<double>(n);
    fmt::print(
        "== {}: parked {} requests on {} keys (timeout {} ms) in {:.2f} s: RSS {:.1f} -> {:.1f} "
        "MiB, {:.1f} bytes per parked request ({})\n",
        label, n, config.key_space, config.timeout_ms, park_s,
        static_cast<double>(before_kib) / 1024.0, static_cast<double>(after_kib) / 1024.0,
        per_request, Impl::parked_object());
    if (stats.resolved.load() != 0) {
      fmt::print("  ERROR: {} requests resolved while parked\n", stats.resolved.load());
      per_request = -1;
    }
    // Then each is resolved once (completed), before the implementation goes. (Naive's
    // completions each walk their key's watchers: at 1,000,000 on 1,000 keys this takes it about
    // a minute.)
    for (const auto& h : handles)
      impl.complete(h);
    impl.shutdown();
    if (stats.resolved.load() != static_cast<long>(n)) {
      fmt::print("  ERROR: {} of {} parked requests resolved\n", stats.resolved.load(), n);
      per_request = -1;
    }
    std::fflush(stdout);
  }
  return per_request;
}

// Runs park<Impl> in a child process; returns its bytes per request (negative: it failed).
template <class Impl>
double park_in_child(const Config& config, const char* label) {
  std::fflush(stdout);
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(pipe_fds[0]);
    const double bytes = park<Impl>(config, label);
    std::fflush(stdout);
    (void)!write(pipe_fds[1], &bytes, sizeof(bytes));
    _exit(bytes < 0 ? 1 : 0);
  }
  close(pipe_fds[1]);
  double bytes = -1;
  if (read(pipe_fds[0], &bytes, sizeof(bytes)) != static_cast<ssize_t>(sizeof(bytes))) bytes = -1;
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? bytes : -1;
}

}  // namespace

// Counts every heap allocation of the process (the library's, the harness's, Boost's). Not
// inlined: g++ would then pair `new` with free() and warn of a mismatch.
[[gnu::noinline]] void* operator new(std::size_t size) {
  ++t_allocations.n;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

int main(int argc, char** argv) {
  Config config;
  CLI::App app{"Purgatory performance (Kafka's TestPurgatoryPerformance)"};
  CLI::Option* num =
      app.add_option("--num", config.num, "number of requests")->check(CLI::PositiveNumber);
  CLI::Option* duration =
      app.add_option("--duration", config.duration_s,
                     "seconds of arrivals instead of --num requests; ends with a soak verdict")
          ->check(CLI::PositiveNumber)
          ->excludes(num);
  bool soak = false;
  app.add_flag("--soak", soak,
               "soak preset: --impl=ours --duration 600 --rate 100000 --sample 10 unless given")
      ->excludes(num);
  app.add_option("--csv", config.csv, "also write the samples to this CSV file");
  CLI::Option* rate =
      app.add_option("--rate", config.rate, "arrival rate, requests per second (Poisson)")
          ->check(CLI::PositiveNumber);
  app.add_option("--pct50", config.pct50, "median completion latency, ms (log-normal)")
      ->check(CLI::PositiveNumber);
  app.add_option("--pct75", config.pct75, "75th percentile completion latency, ms")
      ->check(CLI::PositiveNumber);
  app.add_option("--timeout", config.timeout_ms, "request timeout, ms")->check(CLI::PositiveNumber);
  app.add_option("--keys", config.keys, "keys watched per request")->check(CLI::PositiveNumber);
  app.add_option("--key-space-size", config.key_space, "number of distinct keys")
      ->check(CLI::PositiveNumber);
  app.add_option("--shards", config.shards, "watch-list shards (ours)")
      ->check(CLI::Range(1, 65536));
  CLI::Option* sample =
      app.add_option("--sample", config.sample_s, "sampling period (purgatory size, RSS), s")
          ->check(CLI::PositiveNumber);
  app.add_option("--executor", config.executor,
                 "where our expiries run: inline (the reaper thread) or thread (a second one)")
      ->check(CLI::IsMember({"inline", "thread"}));
  CLI::Option* impl =
      app.add_option(
             "--impl", config.impl,
             "ours, naive, lean (a lower bound, not a purgatory), null (the harness alone), "
             "or several one after the other in one process, comma-separated (both = "
             "ours,naive); with null, also prints each one's CPU per request minus the harness's")
          ->check([](const std::string& list) -> std::string {
            for (const std::string& name : impl_list(list)) {
              if (name != "ours" && name != "naive" && name != "null" && name != "lean") {
                return "unknown implementation '" + name + "' (ours, naive, lean, null, both)";
              }
            }
            return impl_list(list).empty() ? "no implementation given" : "";
          });
  app.add_option("--parked", config.parked,
                 "memory mode: park this many requests that wait for their timeout (one key each) "
                 "and print the RSS growth per request; each --impl in a process of its own")
      ->check(CLI::PositiveNumber)
      ->excludes(duration)
      ->excludes(num);
  app.add_option("--threads", config.threads,
                 "arriving threads sharing the purgatory, each with its own completer thread; "
                 "each issues --rate/N per second")
      ->check(CLI::Range(1, 64));
  CLI::Option* timeout_option = app.get_option("--timeout");
  CLI11_PARSE(app, argc, argv);
  if (config.parked > 0) {
    if (timeout_option->count() == 0) config.timeout_ms = 60'000;
    std::vector<std::pair<std::string, double>> bytes;
    for (const std::string& name : impl_list(config.impl)) {
      if (name == "ours") bytes.emplace_back(name, park_in_child<Ours>(config, "ours"));
      if (name == "naive") bytes.emplace_back(name, park_in_child<Naive>(config, "naive"));
      if (name == "lean") bytes.emplace_back(name, park_in_child<Lean>(config, "lean"));
    }
    bool failed = false;
    std::string line;
    for (const auto& [name, b] : bytes) {
      failed = failed || b < 0;
      line += fmt::format("{}{} {:.1f}", line.empty() ? "" : ", ", name, b);
    }
    // Last, for scripts.
    fmt::print("bytes per parked request: {}\n", line);
    return failed ? 1 : 0;
  }
  if (soak) {
    if (impl->count() == 0) config.impl = "ours";
    if (duration->count() == 0) config.duration_s = 600;
    if (rate->count() == 0) config.rate = 100'000;
    if (sample->count() == 0) config.sample_s = 10;
  }
  if (std::ranges::count(impl_list(config.impl), "lean") > 0 &&
      (config.keys > Lean::kMaxKeys || config.timeout_ms > Lean::kMaxTimeoutMs)) {
    fmt::print(stderr, "--impl=lean takes at most {} keys and a timeout of at most {} ms\n",
               Lean::kMaxKeys, Lean::kMaxTimeoutMs);
    return 1;
  }
  if (config.pct75 < config.pct50) {
    fmt::print(stderr, "--pct75 ({}) must not be below --pct50 ({})\n", config.pct75, config.pct50);
    return 1;
  }

  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv(
      config.csv.empty() ? nullptr : std::fopen(config.csv.c_str(), "w"), &std::fclose);
  if (!config.csv.empty()) {
    if (!csv) {
      fmt::print(stderr, "--csv: cannot write {}\n", config.csv);
      return 1;
    }
    fmt::print(csv.get(), "time_s,arrived,resolved,pending,rss_mib,watched,impl\n");
  }

  std::vector<std::pair<std::string, Result>> results;
  for (const std::string& name : impl_list(config.impl)) {
    if (name == "ours") results.emplace_back(name, run<Ours>(config, "ours", csv.get()));
    if (name == "naive") results.emplace_back(name, run<Naive>(config, "naive", csv.get()));
    if (name == "lean") results.emplace_back(name, run<Lean>(config, "lean", csv.get()));
    if (name == "null") results.emplace_back(name, run<Null>(config, "null", csv.get()));
  }

  bool failed = false;
  if (config.duration_s > 0) {
    std::string reasons;
    for (const auto& [label, result] : results) {
      if (result.soak_failure.empty()) continue;
      reasons += (reasons.empty() ? "" : "; ") +
                 (results.size() > 1 ? label + ": " : std::string()) + result.soak_failure;
    }
    failed = !reasons.empty();
    if (failed) {
      fmt::print("soak: FAIL ({})\n", reasons);
    } else {
      fmt::print("soak: PASS\n");
    }
  }
  // Last, as scripts/bench-report and the README read it.
  const auto find = [&](const char* label) -> const Result* {
    for (const auto& [name, result] : results) {
      if (name == label) return &result;
    }
    return nullptr;
  };
  const Result* ours = find("ours");
  const Result* naive = find("naive");
  const Result* null = find("null");
  const auto per_request_us = [](const Result& r) {
    return 1e6 * r.cpu_s / static_cast<double>(std::max(r.requests, 1L));
  };
  if (ours != nullptr && naive != nullptr) {
    fmt::print("cpu ours {:.2f} s, naive {:.2f} s\n", ours->cpu_s, naive->cpu_s);
    fmt::print("cpu ratio naive/ours: {:.2f}\n", naive->cpu_s / ours->cpu_s);
  }
  if (null != nullptr) {
    for (const auto& [name, result] : results) {
      if (name == "null") continue;
      fmt::print("cpu per request minus the harness: {} {:.3f} us ({:.3f} - {:.3f})\n", name,
                 per_request_us(result) - per_request_us(*null), per_request_us(result),
                 per_request_us(*null));
    }
  }
  return failed ? 1 : 0;
}
