// fuzz_purgatory_concurrent: the purgatory and its timer driven by three threads at once (this one
// and two persistent workers), each running its own stream of operations cut from the input, on
// the test-only hooked libraries: every race point (a window between a check and its action)
// pauses on a schedule seeded from the input, so the input chooses which windows open. (The hook
// is a lean one of its own rather than tests/support's RaceSchedule, whose sleeps and bookkeeping
// would cost most of each run: short spins and a few yields here.)
//
// Script: 4 header bytes (shards; pause probability; seed), then steps until the input ends or
// kMaxSteps: a step's first byte picks the thread (bits 6-7, 3 = this one) and the operation
// (bits 0-3); its arguments follow (README.md documents the encoding). Operations are built before
// the threads start; each step only calls the library.
//
// What is checkable under concurrency (abort() with a message on the first broken one):
//   during the run: on_complete() at most once per operation; on_expiration() only after an
//     expiry, once; an expiry never before watch time + timeout; a refused watch
//     (PurgatoryShutDown) never gets an outcome from the purgatory; at most one accepted watch per
//     operation; watched()/num_delayed() never above every pair/operation there is (a sum read
//     shard by shard may overshoot what existed together, never wrap negative); when a shutdown()
//     returns, every operation accepted before it began and not handed back has an outcome and
//     its callbacks have run.
//   at quiescence (threads joined): watched() and num_delayed() equal what is still waiting;
//     cancelled_total equals the operations handed back; expired_total and shut_down_total equal
//     the operations with that outcome; a handed-back operation was never expired or shut down;
//     the waiting-time histogram counts every outcome the purgatory decided.
//   teardown: shutdown() gives every waiting operation one outcome, handed-back ones are
//     completed by their owner, every accepted operation ends with exactly one on_complete(), and
//     nothing leaks (LeakSanitizer).
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_script.hpp"
#include "purgatory/delayed_operation.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/errors.hpp"
#include "purgatory/timer/clock.hpp"
#include "purgatory/timer/detail/race_point.hpp"
#include "purgatory/timer/executor.hpp"
#include "purgatory/timer/external_driver.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace {

using namespace purgatory;
using namespace purgatory::fuzz;

constexpr int kThreads = 3;
constexpr int kOps = 8;
constexpr int kKeys = 4;
constexpr std::size_t kMaxSteps = 96;

// One operation of the run, with what its callbacks saw. Thread-safe.
class FuzzOperation final : public DelayedOperation {
 public:
  FuzzOperation(Nanos timeout, const ManualClock& clock, int id)
      : DelayedOperation(timeout), clock_(clock), id_(id) {}

  std::atomic<bool> ready{false};
  std::atomic<int> completions{0};
  std::atomic<int> expirations{0};
  std::atomic<bool> callbacks_done{false};
  // The earliest clock time read just before a watch call of it: an accepted watch's deadline is
  // at least this + timeout.
  std::atomic<std::int64_t> watch_start{kNotWatched};
  static constexpr std::int64_t kNotWatched = std::numeric_limits<std::int64_t>::max();

 protected:
  bool try_complete() override {
    purgatory::fuzz::check(lock_held_by_current_thread(), "op {}: try_complete() without the lock",
                           id_);
    purgatory::fuzz::check(outcome() == Outcome::pending, "op {}: try_complete() after its outcome",
                           id_);
    return ready.load() && force_complete();
  }
  void on_complete() override {
    purgatory::fuzz::check(!lock_held_by_current_thread(),
                           "op {}: on_complete() with the lock held", id_);
    const int before = completions.fetch_add(1);
    purgatory::fuzz::check(before == 0, "op {}: on_complete() ran twice ({})", id_,
                           purgatory::to_string(outcome()));
    const Outcome o = outcome();
    purgatory::fuzz::check(o != Outcome::pending, "op {}: on_complete() with no outcome", id_);
    if (o == Outcome::expired) {
      const std::int64_t start = watch_start.load();
      const std::int64_t now = clock_.now().count();
      purgatory::fuzz::check(start != kNotWatched, "op {}: expired, but no watch of it was started",
                             id_);
      purgatory::fuzz::check(now >= start + timeout().count(),
                             "op {}: expired early: now {}, watched at {} + {}", id_, now, start,
                             timeout().count());
    } else {
      callbacks_done = true;
    }
  }
  void on_expiration() override {
    purgatory::fuzz::check(outcome() == Outcome::expired, "op {}: on_expiration() for outcome {}",
                           id_, purgatory::to_string(outcome()));
    purgatory::fuzz::check(completions.load() == 1 && expirations.fetch_add(1) == 0,
                           "op {}: on_expiration() before on_complete() or twice", id_);
    callbacks_done = true;
  }

 private:
  const ManualClock& clock_;
  const int id_;
};

using FuzzRef = purgatory::Ref<FuzzOperation>;

enum class Kind : std::uint8_t {
  watch,
  set_ready,
  check_key,
  force,
  safe_try,
  cancel_key,
  advance,
  read_gauges,
  shutdown,
  locked_check,
};

struct Step {
  Kind kind = Kind::read_gauges;
  int target = 0;  // operation slot or key
  std::int64_t amount = 0;
};

// What the run knows about one operation (written by the threads, read at quiescence).
struct OpRecord {
  FuzzRef op;
  unsigned keys = 0;
  std::atomic<int> accepted{0};     // watch calls that returned (not thrown)
  std::atomic<int> refused{0};      // watch calls that threw PurgatoryShutDown
  std::atomic<int> handed{0};       // times cancel_for_key() returned it
  std::atomic<bool> forced{false};  // some thread called force_complete()/safe_try_complete()
  std::atomic<std::uint64_t> accepted_seq{0};  // sequence number when its watch returned
};

// The race-point hook: a per-thread generator seeded from the input and the thread's stream
// decides at each point whether to pause there. Installed once, before any worker starts.
class RaceHook {
 public:
  static void arm(std::uint64_t seed, std::uint32_t threshold) {
    static const bool installed = [] {
      purgatory::detail::set_race_point_hook(&RaceHook::point);
      return true;
    }();
    (void)installed;
    seed_.store(seed, std::memory_order_relaxed);
    threshold_.store(threshold, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_release);  // the threads reseed on their next point
  }
  static void disarm() { threshold_.store(0, std::memory_order_relaxed); }
  // Which stream the calling thread runs (mixed into its seed).
  static void set_stream(int stream) { t_stream = static_cast<std::uint64_t>(stream) + 1; }

 private:
  static std::uint64_t mix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }
  static void point(const char* where) noexcept {
    const std::uint32_t threshold = threshold_.load(std::memory_order_relaxed);
    if (threshold == 0) return;
    const std::uint64_t epoch = epoch_.load(std::memory_order_acquire);
    if (t_epoch != epoch) {
      t_epoch = epoch;
      t_state = mix(seed_.load(std::memory_order_relaxed) ^ mix(t_stream));
    }
    // Each point draws differently: the same schedule pauses at some windows and not others.
    t_state = mix(t_state ^ reinterpret_cast<std::uintptr_t>(where));
    if (static_cast<std::uint32_t>(t_state) >= threshold) return;
    // Mostly a short spin (16 to 256 pause instructions: the other threads run on the other
    // core meanwhile); one pause in 8 yields the core. A yield on a loaded machine can cost a
    // whole time slice, so spinning keeps the runs fast.
    if (((t_state >> 40) & 7) == 0) {
      std::this_thread::yield();
      return;
    }
    const unsigned spins = 16U << ((t_state >> 32) % 5);
    for (unsigned i = 0; i < spins; ++i)
      __builtin_ia32_pause();
  }

  static inline std::atomic<std::uint64_t> seed_{0};
  static inline std::atomic<std::uint32_t> threshold_{0};
  static inline std::atomic<std::uint64_t> epoch_{0};
  static inline thread_local std::uint64_t t_epoch = 0;
  static inline thread_local std::uint64_t t_state = 0;
  static inline thread_local std::uint64_t t_stream = 0;
};

class Run;

// Two threads that live as long as the process: starting threads per input would cost more than
// the input itself.
class Workers {
 public:
  static Workers& instance() {
    static Workers* w = new Workers;  // never destroyed: the threads outlive main()'s return
    return *w;
  }
  // Runs stream `i + 1` of `run` on worker i, and stream 0 on the calling thread; returns when all
  // three are done.
  void run_all(Run& run);

 private:
  Workers() {
    for (int i = 0; i < kThreads - 1; ++i) {
      std::thread([this, i] { loop(i); }).detach();
    }
  }
  void loop(int i);

  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t generation_ = 0;  // guarded by mu_
  int busy_ = 0;                  // guarded by mu_
  Run* run_ = nullptr;            // guarded by mu_
};

class Run {
 public:
  explicit Run(Script& s) : script_(s) {
    const std::uint8_t b0 = s.byte();
    const std::uint8_t b1 = s.byte();
    const std::uint64_t seed = (static_cast<std::uint64_t>(s.byte()) << 8) | s.byte();
    shards_ = std::size_t{1} << (b0 & 3);
    // Pause at a race point with probability (b1 % 64) / 256: up to 25%.
    pause_threshold_ = static_cast<std::uint32_t>(b1 % 64) << 24;
    seed_ = seed ^ (static_cast<std::uint64_t>(b0) << 16) ^ (static_cast<std::uint64_t>(b1) << 24);

    purgatory::TimerOptions options;
    options.name = "fuzz-mt";
    options.tick = std::chrono::milliseconds(1);
    options.wheel_size = 8;
    options.clock = &clock_;
    options.executor = std::make_shared<purgatory::InlineExecutor>();
    options.driver = purgatory::TimerOptions::Driver::external;
    options.on_task_error = [](const purgatory::TimerTask&, std::exception_ptr) {
      fail("a timer task threw");
    };
    driver_.reset();
    timer_ = std::make_shared<purgatory::SystemTimer>(std::move(options));
    driver_.emplace(*timer_);
    purgatory::PurgatoryOptions popts;
    popts.name = "fuzz-mt";
    popts.shards = shards_;
    popts.on_callback_error = [](const DelayedOperation&, std::exception_ptr,
                                 std::string_view where) {
      fail("an operation callback threw in {}", where);
    };
    purgatory_ = std::make_unique<purgatory::DelayedOperationPurgatory<int>>(timer_, popts);
    parse();
  }

  void execute() {
    RaceHook::arm(seed_, pause_threshold_);
    Workers::instance().run_all(*this);
    RaceHook::disarm();
    check_quiescent();
    teardown();
  }

  void run_stream(int thread) {
    RaceHook::set_stream(thread);
    for (const Step& s : streams_[static_cast<std::size_t>(thread)])
      perform(s);
  }

 private:
  void parse() {
    for (std::size_t step = 0; step < kMaxSteps && !script_.done(); ++step) {
      const std::uint8_t b = script_.byte();
      const int thread = (b >> 6) % kThreads;
      Step s;
      switch (b & 0x0F) {
        case 0:
        case 1:
        case 11: {
          s.kind = Kind::watch;
          s.target = script_.byte() % kOps;
          OpRecord& r = ops_[static_cast<std::size_t>(s.target)];
          const std::uint8_t keys = script_.byte();
          const std::uint8_t timeout = script_.byte();
          if (!r.op) {  // the first watch step of a slot decides its operation
            r.keys = ((keys & 0x7FU) % 15U) + 1U;
            r.op = FuzzRef(new FuzzOperation(Nanos{(timeout % 64) * kUnit}, clock_, s.target));
            r.op->ready = (keys & 0x80) != 0;
          }
          break;
        }
        case 2:
          s.kind = Kind::set_ready;
          s.target = script_.byte() % kOps;
          break;
        case 3:
        case 12:
          s.kind = Kind::check_key;
          s.target = script_.byte() % kKeys;
          break;
        case 4:
          s.kind = Kind::force;
          s.target = script_.byte() % kOps;
          break;
        case 5:
          s.kind = Kind::safe_try;
          s.target = script_.byte() % kOps;
          break;
        case 6:
          s.kind = Kind::cancel_key;
          s.target = script_.byte() % kKeys;
          break;
        case 7:
        case 13:
          s.kind = Kind::advance;
          s.amount = (script_.byte() % 32) * kUnit;
          break;
        case 8:
          s.kind = Kind::read_gauges;
          break;
        case 9:
          // Rare on purpose: after it, most calls are refused.
          s.kind = (script_.byte() % 4) == 0 ? Kind::shutdown : Kind::read_gauges;
          if (s.kind == Kind::shutdown) ++shutdown_steps_;
          break;
        default:
          s.kind = Kind::locked_check;
          s.target = script_.byte() % kOps;
          break;
      }
      streams_[static_cast<std::size_t>(thread)].push_back(s);
    }
    for (const OpRecord& r : ops_) {
      if (r.op) {
        total_pairs_ += static_cast<std::size_t>(std::popcount(r.keys));
        ++total_ops_;
      }
    }
  }

  static std::vector<int> key_list(unsigned keys) {
    std::vector<int> out;
    for (int k = 0; k < kKeys; ++k) {
      if ((keys & (1U << k)) != 0) out.push_back(k);
    }
    return out;
  }

  OpRecord* record(int slot) {
    OpRecord& r = ops_[static_cast<std::size_t>(slot)];
    return r.op ? &r : nullptr;
  }

  void perform(const Step& s) {
    switch (s.kind) {
      case Kind::watch:
        watch(*record(s.target));
        break;
      case Kind::set_ready:
        if (OpRecord* r = record(s.target)) r->op->ready = true;
        break;
      case Kind::check_key:
        try {
          (void)purgatory_->check_and_complete(s.target);
        } catch (const purgatory::PurgatoryShutDown&) {
        }
        break;
      case Kind::force:
        if (OpRecord* r = record(s.target)) {
          r->forced = true;
          if (r->op->force_complete()) {
            check(r->op->completions.load() == 1,
                  "op {}: force_complete() returned true before on_complete() ran", s.target);
          }
        }
        break;
      case Kind::safe_try:
        if (OpRecord* r = record(s.target)) {
          r->forced = true;  // a direct check completes even an unwatched operation
          (void)r->op->safe_try_complete();
        }
        break;
      case Kind::cancel_key:
        cancel_key(s.target);
        break;
      case Kind::advance:
        clock_.advance(Nanos{s.amount});
        (void)driver_->advance_clock(Nanos::zero());
        break;
      case Kind::read_gauges:
        read_gauges();
        break;
      case Kind::shutdown:
        shutdown_midway();
        break;
      case Kind::locked_check:
        if (OpRecord* r = record(s.target)) {
          // Hold the operation's lock while checking its keys: the checks leave notes that the
          // unlock() serves.
          const std::lock_guard<DelayedOperation> lock(*r->op);
          for (int k : key_list(r->keys)) {
            try {
              (void)purgatory_->check_and_complete(k);
            } catch (const purgatory::PurgatoryShutDown&) {
            }
          }
        }
        break;
    }
  }

  void watch(OpRecord& r) {
    const std::vector<int> keys = key_list(r.keys);
    // Recorded before the call (an expiry can run before it returns): the earliest start of any
    // call, so the accepted one's deadline is at least this + timeout.
    const std::int64_t start = clock_.now().count();
    std::int64_t seen = r.op->watch_start.load();
    while (start < seen && !r.op->watch_start.compare_exchange_weak(seen, start)) {
    }
    try {
      (void)purgatory_->try_complete_else_watch(r.op, keys);
    } catch (const purgatory::PurgatoryShutDown&) {
      ++r.refused;
      return;
    } catch (const purgatory::OperationAlreadyWatched&) {
      return;  // another step watched it first
    }
    r.accepted_seq = seq_.fetch_add(1) + 1;
    check(r.accepted.fetch_add(1) == 0, "an operation was accepted by two watch calls");
  }

  void cancel_key(int key) {
    std::vector<OperationRef> handed;
    try {
      handed = purgatory_->cancel_for_key(key);
    } catch (const purgatory::PurgatoryShutDown&) {
      return;
    }
    for (const OperationRef& op : handed) {
      OpRecord* r = nullptr;
      for (OpRecord& candidate : ops_) {
        if (candidate.op.get() == op.get()) r = &candidate;
      }
      check(r != nullptr, "cancel_for_key({}) returned an operation nobody watched", key);
      check(r->handed.fetch_add(1) == 0, "cancel_for_key() returned one operation twice");
      check(op->outcome() != Outcome::expired && op->outcome() != Outcome::shut_down,
            "cancel_for_key({}) returned an operation the purgatory already decided", key);
      // The owner decides: complete it now (another step may race it with its own force).
      (void)op->force_complete();
    }
  }

  void read_gauges() {
    const std::size_t watched = purgatory_->watched();
    const std::size_t delayed = purgatory_->num_delayed();
    check(watched <= total_pairs_, "watched() {} above the {} pairs there are", watched,
          total_pairs_);
    check(delayed <= total_ops_, "num_delayed() {} above the {} operations there are", delayed,
          total_ops_);
    const purgatory::PurgatoryMetrics m = purgatory_->metrics();
    check(m.completed_total + m.expired_total + m.shut_down_total <= total_ops_,
          "more outcomes counted than operations");
  }

  void shutdown_midway() {
    const std::uint64_t began = seq_.load();
    purgatory_->shutdown();
    // A second call returns at once (idempotent), while the first may still wait: only a lone
    // shutdown() step is sure to be the one that waited.
    if (shutdown_steps_ != 1) return;
    // Every operation accepted before shutdown() began has an outcome and its callbacks ran, or
    // was handed back by cancel_for_key() (checked once the threads are done). Left out: one a
    // thread force-completed, which may have been decided before any watch (then no purgatory
    // waits for its callbacks).
    const std::lock_guard<std::mutex> lock(shutdown_mu_);
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      OpRecord& r = ops_[i];
      const std::uint64_t at = r.accepted_seq.load();
      if (!r.op || at == 0 || at > began || r.forced.load()) continue;
      if (!r.op->callbacks_done.load()) unfinished_at_shutdown_.push_back(static_cast<int>(i));
    }
  }

  void check_quiescent() {
    std::size_t watched = 0;
    std::size_t delayed = 0;
    std::uint64_t handed = 0;
    std::uint64_t expired = 0;
    std::uint64_t shut_down = 0;
    std::uint64_t completed_unhanded = 0;
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const OpRecord& r = ops_[i];
      if (!r.op) continue;
      const Outcome o = r.op->outcome();
      handed += static_cast<std::uint64_t>(r.handed.load());
      expired += o == Outcome::expired ? 1 : 0;
      shut_down += o == Outcome::shut_down ? 1 : 0;
      if (r.handed.load() > 0) {
        check(o == Outcome::pending || o == Outcome::completed,
              "op {}: handed back, then {} by the purgatory", i, purgatory::to_string(o));
      } else if (o == Outcome::completed) {
        ++completed_unhanded;
      }
      if (r.accepted.load() == 0) {
        check(o == Outcome::pending || (o == Outcome::completed && r.forced.load()),
              "op {}: never accepted (refused {} times), yet outcome {}", i, r.refused.load(),
              purgatory::to_string(o));
      }
      check(r.op->completions.load() == (o == Outcome::pending ? 0 : 1),
            "op {}: outcome {} but on_complete() ran {} times", i, purgatory::to_string(o),
            r.op->completions.load());
      if (o != Outcome::pending) {
        check(r.op->callbacks_done.load(), "op {}: callbacks unfinished at quiescence", i);
      }
      if (r.accepted.load() > 0 && r.handed.load() == 0 && o == Outcome::pending) {
        watched += static_cast<std::size_t>(std::popcount(r.keys));
        ++delayed;
      }
    }
    for (int i : unfinished_at_shutdown_) {
      const OpRecord& r = ops_[static_cast<std::size_t>(i)];
      check(r.handed.load() > 0,
            "op {}: shutdown() returned before its callbacks ran (and it was not handed back)", i);
    }
    check(purgatory_->watched() == watched, "watched() {} at quiescence, model {}",
          purgatory_->watched(), watched);
    check(purgatory_->num_delayed() == delayed, "num_delayed() {} at quiescence, model {}",
          purgatory_->num_delayed(), delayed);
    const purgatory::PurgatoryMetrics m = purgatory_->metrics();
    check(m.cancelled_total == handed, "cancelled_total {} but {} handed back", m.cancelled_total,
          handed);
    check(m.expired_total == expired, "expired_total {} but {} expired", m.expired_total, expired);
    check(m.shut_down_total == shut_down, "shut_down_total {} but {} shut down", m.shut_down_total,
          shut_down);
    check(m.completed_total <= completed_unhanded, "completed_total {} above {} completed",
          m.completed_total, completed_unhanded);
    check(m.waited.count == m.completed_total + m.expired_total + m.shut_down_total,
          "waited counts {} outcomes, totals say {}", m.waited.count,
          m.completed_total + m.expired_total + m.shut_down_total);
  }

  void teardown() {
    purgatory_->shutdown();
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      OpRecord& r = ops_[i];
      if (!r.op) continue;
      if (r.handed.load() > 0 || r.accepted.load() == 0) {
        (void)r.op->force_complete();  // the owner's: handed back, refused or never watched
      }
      check(r.op->outcome() != Outcome::pending && r.op->completions.load() == 1,
            "op {}: ended with outcome {} and {} on_complete() calls", i,
            purgatory::to_string(r.op->outcome()), r.op->completions.load());
    }
    check(purgatory_->watched() == 0 && purgatory_->num_delayed() == 0,
          "shutdown() left operations watched");
    purgatory_.reset();
    (void)timer_->close();
  }

  Script& script_;
  ManualClock clock_;
  std::size_t shards_ = 1;
  std::uint32_t pause_threshold_ = 0;
  std::uint64_t seed_ = 1;
  std::shared_ptr<purgatory::SystemTimer> timer_;
  std::optional<purgatory::ExternalDriver> driver_;  // after timer_: detached first
  std::unique_ptr<purgatory::DelayedOperationPurgatory<int>> purgatory_;
  std::array<OpRecord, kOps> ops_;
  std::array<std::vector<Step>, kThreads> streams_;
  std::size_t total_pairs_ = 0;
  std::size_t total_ops_ = 0;
  int shutdown_steps_ = 0;
  std::atomic<std::uint64_t> seq_{0};
  std::mutex shutdown_mu_;
  std::vector<int> unfinished_at_shutdown_;  // guarded by shutdown_mu_
};

void Workers::run_all(Run& run) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    run_ = &run;
    busy_ = kThreads - 1;
    ++generation_;
  }
  cv_.notify_all();
  run.run_stream(0);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return busy_ == 0; });
  run_ = nullptr;
}

void Workers::loop(int i) {
  std::uint64_t seen = 0;
  for (;;) {
    Run* run = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      run = run_;
    }
    run->run_stream(i + 1);
    {
      const std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
    cv_.notify_all();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Script script(data, size);
  Run run(script);
  run.execute();
  return 0;
}
