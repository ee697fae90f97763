// timer_burst: what a server's timer does when a burst of requests arrives at once, on the real
// clock, for our SystemTimer and Boost.Asio's steady_timer side by side in one run.
//
// One thread adds N tasks (default 1,000,000) as fast as it can, each `delay` out, the delays
// uniform over [--min-ms, --max-ms] (default 0..1000 ms); each task records when it ran (a clock
// read and an append to a log, the same for every timer). For each task the lateness is its run
// time minus (steady clock read just before its add + delay): how late a request's timeout fires.
// Reported: process CPU per task (every thread of the process, from the first add until the last
// task ran, allocation and freeing of the task included), lateness p50/p99/p99.9/max, tasks run
// early (must be 0), missing or run twice (must be 0), and the worst 50 ms window of due times
// (the one whose latest task was latest: a stall shows there).
//
//   ours   the default SystemTimer: its reaper thread and its executor thread (1 ms x 20).
//   ours-slack  the same, each task added with a slack of --slack-pct of its delay
//          (SystemTimer::add(task, delay, slack)); its line also counts the tasks that ran later
//          than deadline + slack + one tick ("beyond slack"), as ours' does when --slack-pct is
//          given (the same count without slack: what the real clock's lag alone does).
//   asio   one io_context run by one thread; per task a heap-allocated steady_timer whose
//          async_wait handler records the run and frees the timer, created on the io thread in
//          chunks of 1024 per handler (what an Asio server's handlers do).
//
//   timer_burst                                # both, N = 1M, 0..1000 ms
//   timer_burst --impl ours --n 200000 --json out.json
//   timer_burst --impl ours --inline --threads   # tasks run on the reaper; CPU per thread
//   timer_burst --slack-pct 12.5                 # ours, ours-slack and asio

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "purgatory/timer/system_timer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using purgatory::Nanos;

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<Nanos>(Clock::now().time_since_epoch()).count();
}

std::int64_t process_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct Options {
  std::size_t n = 1'000'000;
  double min_ms = 0;
  double max_ms = 1000;
  std::uint64_t seed = 20261130;
  int wheel_size = 0;            // ours: 0 keeps the default
  bool threads = false;          // print CPU per thread
  bool inline_executor = false;  // ours: run tasks on the reaper thread
  double slack_pct = 12.5;       // ours-slack: slack per task, percent of its delay
  bool slack_given = false;      // --slack-pct given: ours counts the tasks beyond it too
};

// CPU time of each thread of this process (ns, from /proc/self/task/*/schedstat), by name.
std::vector<std::pair<std::string, std::int64_t>> thread_cpu() {
  std::vector<std::pair<std::string, std::int64_t>> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(e.path() / "comm");
    std::ifstream stat(e.path() / "schedstat");
    std::string name;
    std::int64_t ns = 0;
    if (std::getline(comm, name) && (stat >> ns)) out.emplace_back(name, ns);
  }
  return out;
}

void print_thread_cpu(const std::vector<std::pair<std::string, std::int64_t>>& before,
                      std::size_t n) {
  for (const auto& [name, ns] : thread_cpu()) {
    std::int64_t was = 0;
    for (const auto& [b_name, b_ns] : before) {
      if (b_name == name) was = b_ns;
    }
    fmt::print("      thread {:<14} {:7.1f} ns/task\n", name,
               static_cast<double>(ns - was) / static_cast<double>(n));
  }
}

// What one run measured. due[i] and ran[i] in steady-clock nanoseconds.
struct Run {
  std::string impl;
  std::vector<std::int64_t> due;
  std::vector<std::int64_t> ran;    // filled from the RunLog once the runners stopped
  std::size_t extra_runs = 0;       // runs beyond one per task (a timer bug)
  std::int64_t add_seconds_ns = 0;  // how long the adds took
  std::int64_t cpu_ns = 0;
  std::vector<std::int64_t> slack;  // per task, when added with a slack (ours-slack)
  explicit Run(std::size_t n) : due(n), ran(n) {}
};

struct Stats {
  double cpu_per_task_ns = 0;
  double add_ms = 0;
  std::int64_t early = 0;
  std::int64_t missing = 0;
  std::int64_t extra_runs = 0;     // runs beyond one per task
  std::int64_t beyond_slack = -1;  // ours-slack: ran after deadline + slack + 1 ms (-1: no slack)
  double p50_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
  double worst_window_start_ms = 0;  // due time of the window's start, from the first add
  double worst_window_max_ms = 0;
  double worst_window_p99_ms = 0;
  std::vector<double> cdf_ms;  // lateness at quantiles 0, 0.001, ..., 1 (1001 points)
  std::vector<std::pair<double, double>> window_p99_max_ms;  // per 50 ms window of due times
};

double quantile(const std::vector<std::int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1));
  return static_cast<double>(sorted[i]) / 1e6;
}

Stats analyse(const Run& run, std::int64_t first_add) {
  Stats s;
  s.cpu_per_task_ns = static_cast<double>(run.cpu_ns) / static_cast<double>(run.due.size());
  s.add_ms = static_cast<double>(run.add_seconds_ns) / 1e6;
  s.extra_runs = static_cast<std::int64_t>(run.extra_runs);
  std::vector<std::int64_t> late;
  late.reserve(run.due.size());
  constexpr std::int64_t kWindow = 50'000'000;  // 50 ms
  std::vector<std::vector<std::int64_t>> windows;
  for (std::size_t i = 0; i < run.due.size(); ++i) {
    const std::int64_t ran = run.ran[i];
    if (ran == 0) {
      ++s.missing;
      continue;
    }
    const std::int64_t l = ran - run.due[i];
    if (l < 0) ++s.early;
    if (!run.slack.empty()) {
      if (s.beyond_slack < 0) s.beyond_slack = 0;
      if (l > run.slack[i] + 1'000'000) ++s.beyond_slack;  // the default tick: 1 ms
    }
    late.push_back(l);
    const auto w =
        static_cast<std::size_t>(std::max<std::int64_t>(0, run.due[i] - first_add) / kWindow);
    if (windows.size() <= w) windows.resize(w + 1);
    windows[w].push_back(l);
  }
  std::sort(late.begin(), late.end());
  s.p50_ms = quantile(late, 0.5);
  s.p99_ms = quantile(late, 0.99);
  s.p999_ms = quantile(late, 0.999);
  s.max_ms = late.empty() ? 0 : static_cast<double>(late.back()) / 1e6;
  for (int k = 0; k <= 1000; ++k)
    s.cdf_ms.push_back(quantile(late, k / 1000.0));
  for (std::size_t w = 0; w < windows.size(); ++w) {
    auto& v = windows[w];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    const double max = static_cast<double>(v.back()) / 1e6;
    s.window_p99_max_ms.emplace_back(quantile(v, 0.99), max);
    if (max > s.worst_window_max_ms) {
      s.worst_window_max_ms = max;
      s.worst_window_p99_ms = quantile(v, 0.99);
      s.worst_window_start_ms = static_cast<double>(w) * 50.0;
    }
  }
  return s;
}

std::vector<Nanos> make_delays(const Options& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<std::int64_t> dist(static_cast<std::int64_t>(o.min_ms * 1e6),
                                                   static_cast<std::int64_t>(o.max_ms * 1e6));
  std::vector<Nanos> d(o.n);
  for (auto& x : d)
    x = Nanos{dist(rng)};
  return d;
}

// Each task's run, in the order the runs happened: (task index, steady-clock ns), appended one
// after another. Recording at the task's index instead (a random place in an 8 MB array, since
// tasks run in deadline order) missed the cache on every task: about 90 ns per task on this
// machine kind, a cost of the harness charged to whichever timer was measured (timer_burst
// --impl ours --threads: the executor thread went from about 225 to 132 ns per task).
// The run that completes the count wakes the waiting thread: no polling (a 1 ms poll over a 1 s
// burst is about 1,000 wake-ups, 20 to 30 ns per task). Thread-safe.
class RunLog {
 public:
  // The entries are written here, before the burst, so that no page faults in during it.
  explicit RunLog(std::size_t n) : entries_(n) {}

  void record(std::size_t task) {
    const std::int64_t t = now_ns();
    const std::size_t k = next_.fetch_add(1, std::memory_order_relaxed);
    if (k >= entries_.size()) {
      extra_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    entries_[k] = Entry{task, t};
    if (k + 1 == entries_.size()) {
      const std::lock_guard<std::mutex> lock(mu_);
      all_ = true;
      cv_.notify_all();
    }
  }
  // Until every task ran, or a generous deadline passed.
  void wait(const Options& o) {
    const auto limit = Clock::now() + std::chrono::milliseconds(static_cast<int>(o.max_ms)) +
                       std::chrono::seconds(30);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, limit, [this] { return all_; });
  }
  // Once every thread that ran tasks was joined: run.ran[i] for each task that ran. A task that
  // ran twice fills the log early: the runs after the n-th are only counted (in extra_runs), so
  // their tasks show as missing too. Either count above 0 fails the run.
  void fill(Run& run) const {
    const std::size_t n = std::min(next_.load(), entries_.size());
    run.extra_runs = extra_.load();
    for (std::size_t k = 0; k < n; ++k) {
      std::int64_t& ran = run.ran[entries_[k].task];
      if (ran == 0) {
        ran = entries_[k].ns;
      } else {
        ++run.extra_runs;  // ran twice: keep the first
      }
    }
  }

 private:
  struct Entry {
    std::size_t task = 0;
    std::int64_t ns = 0;
  };
  std::vector<Entry> entries_;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> extra_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool all_ = false;  // guarded by mu_
};

std::int64_t run_ours(Run& run, const std::vector<Nanos>& delays, const Options& o,
                      bool with_slack) {
  RunLog log(o.n);
  // The slack each task has (ours-slack) or would have (ours, for the same count of tasks run
  // beyond it: what the real clock's lag alone does).
  if (with_slack || o.slack_given) {
    run.slack.resize(o.n);
    for (std::size_t i = 0; i < o.n; ++i) {
      run.slack[i] =
          static_cast<std::int64_t>(static_cast<double>(delays[i].count()) * o.slack_pct / 100.0);
    }
  }
  purgatory::TimerOptions options;  // the default: reaper thread + executor thread, 1 ms x 20
  if (o.wheel_size != 0) options.wheel_size = o.wheel_size;
  if (o.inline_executor) options.executor = std::make_shared<purgatory::InlineExecutor>();
  purgatory::SystemTimer timer(std::move(options));
  const auto threads0 = thread_cpu();
  const std::int64_t cpu0 = process_cpu_ns();
  const std::int64_t first_add = now_ns();
  for (std::size_t i = 0; i < o.n; ++i) {
    const std::int64_t t = now_ns();
    run.due[i] = t + delays[i].count();
    if (with_slack) {
      timer.add(purgatory::make_task([&log, i] { log.record(i); }), delays[i], Nanos{run.slack[i]});
    } else {
      timer.add(purgatory::make_task([&log, i] { log.record(i); }), delays[i]);
    }
  }
  run.add_seconds_ns = now_ns() - first_add;
  log.wait(o);
  run.cpu_ns = process_cpu_ns() - cpu0;
  if (o.threads) print_thread_cpu(threads0, o.n);
  timer.close();  // joins the threads that ran tasks
  log.fill(run);
  return first_add;
}

// The adds run on the io_context's own thread, as a server's handlers would make them, in chunks
// of kAsioChunk per handler so that expirations interleave with the burst (Asio timers added
// from a foreign thread each wake the reactor, which is slower still).
constexpr std::size_t kAsioChunk = 1024;

std::int64_t run_asio(Run& run, const std::vector<Nanos>& delays, const Options& o) {
  RunLog log(o.n);
  std::atomic<std::int64_t> adds_done_at{0};
  boost::asio::io_context io(1);
  auto work = boost::asio::make_work_guard(io);
  const std::int64_t cpu0 = process_cpu_ns();
  const std::int64_t first_add = now_ns();
  std::function<void(std::size_t)> add_chunk = [&](std::size_t from) {
    const std::size_t to = std::min(o.n, from + kAsioChunk);
    for (std::size_t i = from; i < to; ++i) {
      const std::int64_t t = now_ns();
      run.due[i] = t + delays[i].count();
      auto* timer = new boost::asio::steady_timer(io, delays[i]);
      timer->async_wait([&log, i, timer](const boost::system::error_code&) {
        log.record(i);
        delete timer;
      });
    }
    if (to < o.n) {
      boost::asio::post(io, [&add_chunk, to] { add_chunk(to); });
    } else {
      adds_done_at = now_ns();
    }
  };
  boost::asio::post(io, [&] { add_chunk(0); });
  std::thread loop([&] { io.run(); });
  log.wait(o);
  run.add_seconds_ns = adds_done_at.load() - first_add;
  run.cpu_ns = process_cpu_ns() - cpu0;
  work.reset();
  io.stop();
  loop.join();
  log.fill(run);
  return first_add;
}

void print(const std::string& impl, const Stats& s) {
  fmt::print(
      "{:<10} cpu/task {:7.1f} ns | adds {:6.1f} ms | lateness p50 {:6.2f} p99 {:6.2f} p99.9 "
      "{:6.2f} max {:6.2f} ms | early {} missing {} twice {} | worst 50 ms window at {:.0f} ms: "
      "max {:.2f} "
      "p99 {:.2f}\n",
      impl, s.cpu_per_task_ns, s.add_ms, s.p50_ms, s.p99_ms, s.p999_ms, s.max_ms, s.early,
      s.missing, s.extra_runs, s.worst_window_start_ms, s.worst_window_max_ms,
      s.worst_window_p99_ms);
  if (s.beyond_slack >= 0) fmt::print("{:<10} beyond slack + 1 ms: {}\n", "", s.beyond_slack);
  std::fflush(stdout);
}

std::string json_of(const std::string& impl, const Stats& s) {
  std::string cdf;
  for (std::size_t k = 0; k < s.cdf_ms.size(); ++k)
    cdf += fmt::format("{}{:.4f}", k == 0 ? "" : ",", s.cdf_ms[k]);
  return fmt::format(
      "{{\"impl\":\"{}\",\"cpu_per_task_ns\":{:.1f},\"add_ms\":{:.2f},\"early\":{},"
      "\"missing\":{},\"twice\":{},\"p50_ms\":{:.4f},\"p99_ms\":{:.4f},\"p999_ms\":{:.4f},\"max_"
      "ms\":{:.4f},"
      "\"worst_window_start_ms\":{:.0f},\"worst_window_max_ms\":{:.4f},"
      "\"worst_window_p99_ms\":{:.4f},\"beyond_slack\":{},\"cdf_ms\":[{}]}}",
      impl, s.cpu_per_task_ns, s.add_ms, s.early, s.missing, s.extra_runs, s.p50_ms, s.p99_ms,
      s.p999_ms, s.max_ms, s.worst_window_start_ms, s.worst_window_max_ms, s.worst_window_p99_ms,
      s.beyond_slack, cdf);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string impls = "ours,asio";
  std::string json_path;
  CLI::App app{"timer_burst: a burst of timers on the real clock, ours and Asio side by side"};
  app.add_option("--n", o.n, "tasks in the burst")->check(CLI::Range(1, 100'000'000));
  app.add_option("--min-ms", o.min_ms, "shortest delay, ms")->check(CLI::Range(0.0, 3600e3));
  app.add_option("--max-ms", o.max_ms, "longest delay, ms")->check(CLI::Range(0.0, 3600e3));
  auto* impl_option = app.add_option("--impl", impls, "comma-separated: ours, ours-slack, asio");
  app.add_option("--seed", o.seed, "delay generator seed");
  app.add_option("--wheel-size", o.wheel_size, "ours: buckets per level (default: the default)");
  app.add_flag("--inline", o.inline_executor,
               "ours: run the tasks on the reaper thread (InlineExecutor), not an executor thread");
  app.add_flag("--threads", o.threads, "ours: also print CPU per task of each thread");
  auto* slack_option =
      app.add_option("--slack-pct", o.slack_pct,
                     "ours-slack: each task's slack, percent of its delay (default 12.5); given "
                     "without --impl, runs ours, ours-slack and asio")
          ->check(CLI::Range(0.0, 100.0));
  app.add_option("--json", json_path, "also write the results (with the lateness CDF) here");
  bool windows = false;
  app.add_flag("--windows", windows, "also print p99 and max lateness of every 50 ms window");
  CLI11_PARSE(app, argc, argv);
  o.slack_given = slack_option->count() > 0;
  if (o.slack_given && impl_option->count() == 0) impls = "ours,ours-slack,asio";
  if (o.max_ms < o.min_ms) {
    fmt::print(stderr, "timer_burst: --max-ms {} is below --min-ms {}\n", o.max_ms, o.min_ms);
    return 2;
  }
  const auto delays = make_delays(o);
  fmt::print("timer_burst: {} tasks, delays uniform over [{}, {}] ms\n", o.n, o.min_ms, o.max_ms);
  std::vector<std::string> entries;
  bool ok = true;
  std::size_t start = 0;
  while (start <= impls.size()) {
    const std::size_t comma = std::min(impls.find(',', start), impls.size());
    const std::string impl = impls.substr(start, comma - start);
    start = comma + 1;
    if (impl.empty()) continue;
    Run run(o.n);
    std::int64_t first_add = 0;
    if (impl == "ours" || impl == "ours-slack") {
      first_add = run_ours(run, delays, o, impl == "ours-slack");
    } else if (impl == "asio") {
      first_add = run_asio(run, delays, o);
    } else {
      fmt::print(stderr, "timer_burst: unknown --impl '{}' (ours, ours-slack, asio)\n", impl);
      return 2;
    }
    const Stats s = analyse(run, first_add);
    print(impl, s);
    if (windows) {
      for (std::size_t w = 0; w < s.window_p99_max_ms.size(); ++w) {
        fmt::print("  window {:5} ms: p99 {:6.2f} max {:6.2f}\n", w * 50,
                   s.window_p99_max_ms[w].first, s.window_p99_max_ms[w].second);
      }
    }
    entries.push_back(json_of(impl, s));
    ok = ok && s.missing == 0 && s.extra_runs == 0 && (impl == "asio" || s.early == 0);
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << fmt::format("{{\"n\":{},\"min_ms\":{},\"max_ms\":{},\"runs\":[", o.n, o.min_ms,
                       o.max_ms);
    for (std::size_t i = 0; i < entries.size(); ++i)
      out << (i ? "," : "") << entries[i];
    out << "]}\n";
  }
  return ok ? 0 : 1;
}
