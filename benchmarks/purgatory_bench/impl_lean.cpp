// --impl=lean: a lower bound for this workload, not a purgatory.
//
// The least work any purgatory must do here, written as plainly as it can be: an operation of
// two and a half cache lines (from the same pool as ours) is linked on each key's intrusive list
// under a shard mutex (16 shards, as ours), scheduled on a wheel of 1 ms buckets under one mutex,
// driven by its own thread, and decided by one compare-and-swap; its completion leaves the wheel
// and every list at once, as ours does. What it leaves out is what a purgatory owes its users: no
// lock around the completion check (so no Kafka-style checks by key), no metrics or gauges, no
// error reporting, no shutdown that resolves what is still pending, at most kMaxKeys keys and
// kMaxTimeoutMs, one wheel lock for every thread. Ours minus lean is the price of those on this
// machine; lean minus null bounds what any design doing this work could cost.
// `--impl=ours,lean,null` prints what ours and lean each cost over the harness.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "mode_parked.hpp"
#include "mode_rate.hpp"
#include "purgatory/timer/detail/task_pool.hpp"
#include "purgatory_under_test.hpp"
#include "stats.hpp"

namespace purgatory_bench {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

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
    op->num_keys = static_cast<int>(keys.size());  // at most kMaxKeys (lean_refusal)
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

std::string lean_refusal(const Config& config) {
  if (config.keys > Lean::kMaxKeys || config.timeout_ms > Lean::kMaxTimeoutMs) {
    return fmt::format("--impl=lean takes at most {} keys and a timeout of at most {} ms",
                       Lean::kMaxKeys, Lean::kMaxTimeoutMs);
  }
  return "";
}

}  // namespace

const Implementation& lean_implementation() {
  static constexpr Implementation kLean{"lean", &run_rate<Lean>, &park<Lean>, &lean_refusal};
  return kLean;
}

}  // namespace purgatory_bench
