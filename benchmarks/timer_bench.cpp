// timer_bench: how fast are add+cancel and add+expire with many tasks pending, for our timer and
// for what a C++ user would otherwise pick? All four run side by side, with the same payload.
//
// Implementations (BM_<Impl>_<Workload>/<pending>):
//   Wheel            purgatory::SystemTimer: external driver, InlineExecutor, SteadyClock, default
//                    tick and wheel size (1 ms x 20 slots per level).
//   AsioSteadyTimer  one boost::asio::steady_timer + async_wait per task, on one io_context.
//   StdMultimap      std::multimap<deadline, task*>; cancel erases through an iterator kept in
//                    the task.
//   HeapLazyCancel   binary min-heap of (deadline, task*); cancel leaves a tombstone, skipped
//                    when popped (Java's DelayQueue/ScheduledThreadPoolExecutor). Tombstones are
//                    purged once they are a quarter of the heap, as Go's runtime timers do, so an
//                    add+cancel loop does not grow the heap without bound; the purge is timed.
//
// Workloads (the argument is the number of pending tasks):
//   AddCancel   `pending` tasks wait 0..60 s out (set up untimed). Each iteration schedules one
//               more task 0..60 s out and cancels it: a request whose timeout is met.
//   AddAtCancel the same with absolute deadlines, as a server computes them from a time it read
//               once (when the request arrived, or once per event-loop pass: here once per round
//               of kRound iterations, for every implementation): Wheel add_at(), Asio
//               expires_at(), the others their deadline directly. No clock read per add.
//   AddExpire   each iteration schedules `pending` tasks 0..100 ms out (timed), sleeps until all
//               are due (untimed), then expires and runs them all (timed). Time per item = its
//               share of the adds and of the expiry, including any cascade between wheel levels.
//   Readd       (Wheel only) moves one of `pending` scheduled tasks to a new deadline 0..60 s out
//               by adding it again: Kafka's "adding again moves it".
//   Reschedule  (Wheel only) the same move through SystemTimer::reschedule(), in place.
//   CancelAdd   (Wheel only) the same move done as cancel() then add(): the cost Reschedule
//               must not exceed.
//   PendingBytes memory, not time: `pending` tasks waiting 0..60 s out cost bytes_per_task each:
//               heap bytes in use (malloc's own overhead per block included) and the task pool's
//               mappings, after the tasks are created and scheduled, minus before; the task objects
//               are included (each implementation holds them its own way). For the Wheel also
//               library_bytes_per_task: sizeof(TimerTask) plus the wheel's buckets per task (what
//               the library adds to a user's task object).
//
// Why it is fair: every implementation reads steady_clock once per add (once per round of kRound
// adds in AddAtCancel) and once per expiry round, runs the same payload (the task counts its
// runs), and reuses its task objects across iterations, so allocation is charged only where the
// structure itself allocates (multimap nodes, Asio's handler ops). The Asio add+cancel loop runs
// inside a handler on the io_context's own thread, as a server's would: cancel() then queues the
// operation_aborted handler privately instead of waking the reactor with a syscall, and the aborted
// handlers run between rounds of kRound iterations (one event-loop pass, with its epoll_wait(0),
// per round), all timed. A loop pass per iteration (io.poll() after each add+cancel) costs 200-450
// ns here, nearly all of it that syscall, which says nothing about the timer; a busy server's pass
// handles many events, hence kRound = 32. Every benchmark checks that each task ran exactly once
// per round, or never when cancelled, and reports an error otherwise. AddExpire sleeps ~100 ms per
// iteration, so its iteration counts are fixed (its names end in /iterations:N) to keep the whole
// program at about two minutes.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <benchmark/benchmark.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "purgatory/timer/detail/task_pool.hpp"
#include "purgatory/timer/system_timer.hpp"

namespace {

using purgatory::Nanos;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Every benchmark runs in a multi-threaded process, as in any server (a SystemTimer with default
// options starts two threads). glibc skips the atomic instructions of a mutex while a process has
// never started a thread (__libc_single_threaded), so otherwise the benchmarks that happen to run
// before the first thread is started (the 1-thread AddCancelThreads, or any run with a filter)
// would measure uncontended locks without them: about 37% faster add+cancel, for every
// implementation that locks.
const bool kProcessIsMultiThreaded = [] {
  std::thread([] {}).join();
  return true;
}();

constexpr std::uint64_t kSeed = 20240611;
constexpr Nanos kCancelSpan = seconds(60);        // AddCancel, Readd, Reschedule: 0..60 s
constexpr Nanos kExpireSpan = milliseconds(100);  // AddExpire deadlines: 0..100 ms out
constexpr Nanos kExpireSlack = milliseconds(2);   // > one tick: the wheel rounds deadlines up
constexpr int kRound = 32;  // iterations per KeepRunningBatch / Asio loop pass

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Delays uniform over [1 ns, span], from a fixed seed; the timed loops cycle through a table so
// that drawing a random number costs the same small index for every implementation.
std::vector<Nanos> random_delays(std::size_t n, Nanos span, std::uint64_t seed = kSeed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<Nanos::rep> dist(1, span.count());
  std::vector<Nanos> delays(n);
  for (Nanos& d : delays)
    d = Nanos{dist(rng)};
  return delays;
}

constexpr std::size_t kTableSize = std::size_t{1} << 16;  // power of two: index with a mask

// The callback every implementation runs when a task expires.
struct Payload {
  std::uint64_t runs = 0;
  void operator()() noexcept {
    ++runs;
    benchmark::DoNotOptimize(runs);
  }
};

// ---- The four implementations, behind one shape --------------------------------------------
// Impl(n) owns tasks 0..n-1 (never scheduled). add(i, d) schedules task i d from now (moving it if
// scheduled); cancel(i) returns whether it stopped a pending run; expire_due() runs every task due
// now; runs(i) counts task i's runs; loop(state, body) runs body once per benchmark iteration.

// Runs body() once per iteration, kRound iterations per KeepRunningBatch call.
template <class Body>
void plain_loop(benchmark::State& state, Body& body) {
  while (state.KeepRunningBatch(kRound)) {
    for (int k = 0; k < kRound; ++k)
      body();
  }
}

class WheelImpl {
 public:
  explicit WheelImpl(std::size_t n) : timer_(options()) {
    tasks_.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      tasks_.push_back(purgatory::make_task<Task>());
  }
  void add(std::size_t i, Nanos delay) { timer_.add(tasks_[i], delay); }
  void add_at(std::size_t i, std::int64_t deadline) { timer_.add_at(tasks_[i], Nanos{deadline}); }
  bool cancel(std::size_t i) { return tasks_[i]->cancel(); }
  bool reschedule(std::size_t i, Nanos delay) { return timer_.reschedule(*tasks_[i], delay); }
  void expire_due() { timer_.advance_clock(Nanos{0}); }
  [[nodiscard]] std::uint64_t runs(std::size_t i) const { return tasks_[i]->payload.runs; }
  template <class Body>
  void loop(benchmark::State& state, Body& body) {
    plain_loop(state, body);
  }
  // What the library holds for `pending` scheduled tasks beyond the user's own members.
  [[nodiscard]] double library_bytes_per_task(std::size_t pending) const {
    return static_cast<double>(sizeof(purgatory::TimerTask)) +
           static_cast<double>(timer_.wheel_memory_bytes()) / static_cast<double>(pending);
  }

 private:
  // The brief's configuration: driven by advance_clock(), tasks run inline, defaults otherwise.
  static purgatory::TimerOptions options() {
    purgatory::TimerOptions o;
    o.executor = std::make_shared<purgatory::InlineExecutor>();
    o.driver = purgatory::TimerOptions::Driver::external;
    return o;
  }
  struct Task final : purgatory::TimerTask {
    Payload payload;
    void run() override { payload(); }
  };
  purgatory::SystemTimer timer_;
  std::vector<boost::intrusive_ptr<Task>> tasks_;
};

class AsioImpl {
 public:
  explicit AsioImpl(std::size_t n) : payloads_(n) {
    timers_.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      timers_.emplace_back(io_);
  }
  void add(std::size_t i, Nanos delay) {
    timers_[i].expires_after(delay);
    wait(i);
  }
  void add_at(std::size_t i, std::int64_t deadline) {
    timers_[i].expires_at(std::chrono::steady_clock::time_point(Nanos{deadline}));
    wait(i);
  }
  void wait(std::size_t i) {
    timers_[i].async_wait([this, i](const boost::system::error_code& ec) {
      if (ec) {
        ++aborted_;
      } else {
        payloads_[i]();
      }
    });
  }
  bool cancel(std::size_t i) { return timers_[i].cancel() == 1; }
  // Every pending timer is due (AddExpire): run() returns once their handlers have run.
  void expire_due() {
    io_.run();
    io_.restart();
  }
  [[nodiscard]] std::uint64_t runs(std::size_t i) const { return payloads_[i].runs; }
  [[nodiscard]] std::uint64_t aborted() const { return aborted_; }

  // AddCancelThreads: a thread runs the io_context (the aborted handlers) while benchmark threads
  // add and cancel. The handlers then run on that thread only, so aborted_ needs no lock.
  void start_io_thread() {
    work_.emplace(io_.get_executor());
    io_thread_ = std::thread([this] { io_.run(); });
  }
  void stop_io_thread() {
    work_.reset();
    io_.stop();  // the pending timers would keep run() going
    io_thread_.join();
    io_.restart();
  }

  // The iterations run in handlers on the io_context's thread, kRound per handler; each handler
  // posts the next, so the aborted handlers of a round run in the same loop pass, before it.
  template <class Body>
  void loop(benchmark::State& state, Body& body) {
    struct Round {
      benchmark::State* state;
      Body* body;
      boost::asio::io_context* io;
      void operator()() const {
        if (!state->KeepRunningBatch(kRound)) {
          io->stop();
          return;
        }
        for (int k = 0; k < kRound; ++k)
          (*body)();
        boost::asio::post(*io, *this);
      }
    };
    boost::asio::post(io_, Round{&state, &body, &io_});
    io_.run();
    io_.restart();
    io_.poll();  // untimed: nothing should be left, but let stragglers be counted
  }

 private:
  // io_context(1): the single-threaded event loop, Asio's recommended hint for it (AddCancelThreads
  // adds from other threads too: the hint does not turn off Asio's locking, only the UNSAFE hints
  // would).
  boost::asio::io_context io_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread io_thread_;
  std::vector<boost::asio::steady_timer> timers_;  // destroyed before io_
  std::vector<Payload> payloads_;
  std::uint64_t aborted_ = 0;
};

class MultimapImpl {
 public:
  explicit MultimapImpl(std::size_t n) : tasks_(n) {}
  void add(std::size_t i, Nanos delay) { add_at(i, now_ns() + delay.count()); }
  void add_at(std::size_t i, std::int64_t deadline) {
    Task& t = tasks_[i];
    if (t.scheduled) queue_.erase(t.pos);
    t.pos = queue_.emplace(deadline, &t);
    t.scheduled = true;
  }
  bool cancel(std::size_t i) {
    Task& t = tasks_[i];
    if (!t.scheduled) return false;
    queue_.erase(t.pos);
    t.scheduled = false;
    return true;
  }
  void expire_due() {
    const std::int64_t now = now_ns();
    while (!queue_.empty() && queue_.begin()->first <= now) {
      Task* t = queue_.begin()->second;
      queue_.erase(queue_.begin());
      t->scheduled = false;
      t->payload();
    }
  }
  [[nodiscard]] std::uint64_t runs(std::size_t i) const { return tasks_[i].payload.runs; }
  template <class Body>
  void loop(benchmark::State& state, Body& body) {
    plain_loop(state, body);
  }

 private:
  struct Task;
  using Queue = std::multimap<std::int64_t, Task*>;
  struct Task {
    Payload payload;
    Queue::iterator pos;
    bool scheduled = false;
  };
  Queue queue_;
  std::vector<Task> tasks_;
};

class HeapImpl {
 public:
  explicit HeapImpl(std::size_t n) : tasks_(n) { heap_.reserve(n); }
  void add(std::size_t i, Nanos delay) { add_at(i, now_ns() + delay.count()); }
  void add_at(std::size_t i, std::int64_t deadline) {
    Task& t = tasks_[i];
    if (t.scheduled) ++dead_;  // its old entry becomes a tombstone
    t.scheduled = true;
    ++t.generation;
    heap_.push_back(Entry{deadline, &t, t.generation});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  bool cancel(std::size_t i) {
    Task& t = tasks_[i];
    if (!t.scheduled) return false;
    t.scheduled = false;
    if (++dead_ > heap_.size() / 4) purge();
    return true;
  }
  void expire_due() {
    const std::int64_t now = now_ns();
    while (!heap_.empty() && heap_.front().deadline <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Entry e = heap_.back();
      heap_.pop_back();
      if (!live(e)) {
        --dead_;
        continue;
      }
      e.task->scheduled = false;
      e.task->payload();
    }
  }
  [[nodiscard]] std::uint64_t runs(std::size_t i) const { return tasks_[i].payload.runs; }
  template <class Body>
  void loop(benchmark::State& state, Body& body) {
    plain_loop(state, body);
  }

 private:
  struct Task {
    Payload payload;
    std::uint64_t generation = 0;  // bumped by each add: entries of older adds are tombstones
    bool scheduled = false;
  };
  struct Entry {
    std::int64_t deadline;
    Task* task;
    std::uint64_t generation;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const noexcept {
      return a.deadline > b.deadline;
    }
  };
  static bool live(const Entry& e) noexcept {
    return e.task->scheduled && e.task->generation == e.generation;
  }
  void purge() {
    std::erase_if(heap_, [](const Entry& e) { return !live(e); });
    std::make_heap(heap_.begin(), heap_.end(), Later{});
    dead_ = 0;
  }

  std::vector<Task> tasks_;
  std::vector<Entry> heap_;
  std::size_t dead_ = 0;  // tombstones in heap_
};

// ---- Workloads -------------------------------------------------------------------------------

// Schedules tasks 0..pending-1 at random delays over `span` (untimed setup).
template <class Impl>
void schedule_pending(Impl& impl, std::size_t pending, Nanos span) {
  const auto delays = random_delays(pending, span, kSeed + 1);
  for (std::size_t i = 0; i < pending; ++i)
    impl.add(i, delays[i]);
}

// kAbsolute: AddAtCancel (deadlines from a time read once per round), else AddCancel.
template <class Impl, bool kAbsolute = false>
void add_cancel(benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  Impl impl(pending + 1);
  schedule_pending(impl, pending, kCancelSpan);
  const std::size_t probe = pending;  // the one task added and cancelled, reused
  const auto delays = random_delays(kTableSize, kCancelSpan);
  std::size_t next = 0;
  std::uint64_t cancelled = 0;
  std::int64_t round_now = 0;
  auto body = [&] {
    const Nanos delay = delays[next++ & (kTableSize - 1)];
    if constexpr (kAbsolute) {
      if ((next & (kRound - 1)) == 1) round_now = now_ns();
      impl.add_at(probe, round_now + delay.count());
    } else {
      impl.add(probe, delay);
    }
    cancelled += impl.cancel(probe) ? 1 : 0;
  };
  impl.loop(state, body);

  const auto iterations = static_cast<std::uint64_t>(state.iterations());
  if (cancelled != iterations || impl.runs(probe) != 0) {
    state.SkipWithError("a cancel() failed or a cancelled task ran");
  }
  if constexpr (std::is_same_v<Impl, AsioImpl>) {
    if (impl.aborted() != iterations) state.SkipWithError("an aborted handler did not run");
  }
  state.SetItemsProcessed(state.iterations());
}

template <class Impl>
void add_expire(benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  Impl impl(pending);
  const auto delays = random_delays(pending, kExpireSpan);
  std::uint64_t rounds = 0;
  bool ok = true;
  for (auto _ : state) {
    for (std::size_t i = 0; i < pending; ++i)
      impl.add(i, delays[i]);
    state.PauseTiming();
    for (std::size_t i = 0; i < pending; ++i)
      ok = ok && impl.runs(i) == rounds;  // none ran early
    std::this_thread::sleep_for(kExpireSpan + kExpireSlack);
    state.ResumeTiming();
    impl.expire_due();
    ++rounds;
  }
  for (std::size_t i = 0; i < pending; ++i)
    ok = ok && impl.runs(i) == rounds;
  if (!ok) state.SkipWithError("a task did not run exactly once per round");
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

#if defined(__GLIBC__)
// Bytes of heap in use, every arena (malloc's per-block overhead included), plus the task pool's.
std::size_t memory_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd + purgatory::detail::pool_mapped_bytes();
}
#endif

template <class Impl>
void pending_bytes(benchmark::State& state) {
#if defined(__GLIBC__)
  const auto pending = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const std::size_t before = memory_in_use();
    Impl impl(pending);
    schedule_pending(impl, pending, kCancelSpan);
    const std::size_t after = memory_in_use();
    state.counters["bytes_per_task"] =
        static_cast<double>(after - before) / static_cast<double>(pending);
    if constexpr (std::is_same_v<Impl, WheelImpl>) {
      state.counters["library_bytes_per_task"] = impl.library_bytes_per_task(pending);
    }
  }
#else
  state.SkipWithError("PendingBytes reads glibc's mallinfo2()");
#endif
}

// Moves scheduled tasks, round robin, to new deadlines: by add() again, by reschedule(), or the
// slow way, cancel() then add() (what reschedule() must not cost more than).
enum class Move { readd, reschedule, cancel_add };

template <class Impl, Move kHow>
void move_pending(benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  Impl impl(pending);
  schedule_pending(impl, pending, kCancelSpan);
  const auto delays = random_delays(kTableSize, kCancelSpan);
  std::size_t next = 0;
  std::size_t task = 0;
  std::uint64_t moved = 0;
  auto body = [&] {
    const Nanos delay = delays[next++ & (kTableSize - 1)];
    if constexpr (kHow == Move::reschedule) {
      moved += impl.reschedule(task, delay) ? 1 : 0;
    } else if constexpr (kHow == Move::cancel_add) {
      moved += impl.cancel(task) ? 1 : 0;
      impl.add(task, delay);
    } else {
      impl.add(task, delay);
      ++moved;
    }
    if (++task == pending) task = 0;
  };
  impl.loop(state, body);
  bool ok = moved == static_cast<std::uint64_t>(state.iterations());
  for (std::size_t i = 0; i < pending; ++i)
    ok = ok && impl.runs(i) == 0;
  if (!ok) state.SkipWithError("a move failed or a moved task ran");
  state.SetItemsProcessed(state.iterations());
}

// ---- Several threads: AddCancelThreads ----------------------------------------------------
// `pending` tasks wait (added untimed by the setup thread); each benchmark thread then adds and
// cancels its own probe task, as request threads of a server do with their timeouts. Reported:
// pairs per second over all threads, on the real clock (items_per_second), so threads:2 against
// threads:1 is the scaling. One timer (ours: its bases; Asio: one io_context, run by a thread of
// its own so that the aborted handlers run) shared by the threads.
constexpr int kMaxThreads = 8;
// The probes are created one after the other, so neighbours in memory; threads' probes sit
// kProbeStride tasks apart so that two threads never write one cache line (that would measure
// the harness's false sharing, not the timer: a server's request threads make their own tasks).
constexpr std::size_t kProbeStride = 8;

template <class Impl>
struct SharedImpl {
  static inline std::unique_ptr<Impl> impl;
};

template <class Impl>
void shared_setup(const benchmark::State& state) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  SharedImpl<Impl>::impl = std::make_unique<Impl>(pending + kMaxThreads * kProbeStride);
  schedule_pending(*SharedImpl<Impl>::impl, pending, kCancelSpan);
  if constexpr (std::is_same_v<Impl, AsioImpl>) SharedImpl<Impl>::impl->start_io_thread();
}

template <class Impl>
void shared_teardown(const benchmark::State&) {
  if constexpr (std::is_same_v<Impl, AsioImpl>) SharedImpl<Impl>::impl->stop_io_thread();
  SharedImpl<Impl>::impl.reset();
}

template <class Impl>
void add_cancel_threads(benchmark::State& state) {
  Impl& impl = *SharedImpl<Impl>::impl;
  const std::size_t probe = static_cast<std::size_t>(state.range(0)) +
                            static_cast<std::size_t>(state.thread_index()) * kProbeStride;
  const auto delays = random_delays(kTableSize, kCancelSpan, kSeed + 7 + state.thread_index());
  std::size_t next = 0;
  std::uint64_t cancelled = 0;
  for (auto _ : state) {
    impl.add(probe, delays[next++ & (kTableSize - 1)]);
    cancelled += impl.cancel(probe) ? 1 : 0;
  }
  if (cancelled != static_cast<std::uint64_t>(state.iterations()) || impl.runs(probe) != 0) {
    state.SkipWithError("a cancel() failed or a cancelled task ran");
  }
  state.SetItemsProcessed(state.iterations());
}

#define PURGATORY_THREADS_BENCH(Impl, Name)                    \
  void BM_##Name##_AddCancelThreads(benchmark::State& state) { \
    add_cancel_threads<Impl>(state);                           \
  }                                                            \
  BENCHMARK(BM_##Name##_AddCancelThreads)                      \
      ->Arg(1000000)                                           \
      ->Setup(shared_setup<Impl>)                              \
      ->Teardown(shared_teardown<Impl>)                        \
      ->Threads(1)                                             \
      ->Threads(2)                                             \
      ->UseRealTime()                                          \
      ->MinTime(1.0)                                           \
      ->Unit(benchmark::kNanosecond)

PURGATORY_THREADS_BENCH(WheelImpl, Wheel);
PURGATORY_THREADS_BENCH(AsioImpl, AsioSteadyTimer);

// AddCancel, Readd and Reschedule find their iteration count as usual; AddExpire's are fixed (see
// the top).
void cancel_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kNanosecond);
}

#define PURGATORY_TIMER_BENCH(Impl, Name)                                                      \
  void BM_##Name##_AddCancel(benchmark::State& state) {                                        \
    add_cancel<Impl>(state);                                                                   \
  }                                                                                            \
  BENCHMARK(BM_##Name##_AddCancel)->Apply(cancel_sizes);                                       \
  void BM_##Name##_AddAtCancel(benchmark::State& state) {                                      \
    add_cancel<Impl, /*kAbsolute=*/true>(state);                                               \
  }                                                                                            \
  BENCHMARK(BM_##Name##_AddAtCancel)->Apply(cancel_sizes);                                     \
  void BM_##Name##_AddExpire(benchmark::State& state) {                                        \
    add_expire<Impl>(state);                                                                   \
  }                                                                                            \
  BENCHMARK(BM_##Name##_AddExpire)->Arg(1000)->Iterations(20)->Unit(benchmark::kNanosecond);   \
  BENCHMARK(BM_##Name##_AddExpire)->Arg(100000)->Iterations(5)->Unit(benchmark::kNanosecond);  \
  BENCHMARK(BM_##Name##_AddExpire)->Arg(1000000)->Iterations(3)->Unit(benchmark::kNanosecond); \
  void BM_##Name##_PendingBytes(benchmark::State& state) {                                     \
    pending_bytes<Impl>(state);                                                                \
  }                                                                                            \
  BENCHMARK(BM_##Name##_PendingBytes)->Arg(1000000)->Iterations(1)->Unit(benchmark::kMillisecond)

PURGATORY_TIMER_BENCH(WheelImpl, Wheel);
PURGATORY_TIMER_BENCH(AsioImpl, AsioSteadyTimer);
PURGATORY_TIMER_BENCH(MultimapImpl, StdMultimap);
PURGATORY_TIMER_BENCH(HeapImpl, HeapLazyCancel);

void BM_Wheel_Readd(benchmark::State& state) {
  move_pending<WheelImpl, Move::readd>(state);
}
BENCHMARK(BM_Wheel_Readd)->Apply(cancel_sizes);
void BM_Wheel_Reschedule(benchmark::State& state) {
  move_pending<WheelImpl, Move::reschedule>(state);
}
BENCHMARK(BM_Wheel_Reschedule)->Apply(cancel_sizes);
void BM_Wheel_CancelAdd(benchmark::State& state) {
  move_pending<WheelImpl, Move::cancel_add>(state);
}
BENCHMARK(BM_Wheel_CancelAdd)->Apply(cancel_sizes);

}  // namespace

BENCHMARK_MAIN();
