#include "race_schedule.hpp"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "purgatory/timer/detail/race_point.hpp"

#if !defined(PURGATORY_RACE_HOOKS)
#error "race_schedule.cpp must be built against the hooked libraries (PURGATORY_RACE_HOOKS)"
#endif

namespace purgatory::test {
namespace {

struct State {
  RaceSchedule::Options options;
  std::uint64_t epoch = 0;
  std::atomic<std::uint64_t> next_thread{0};
  std::atomic<std::uint64_t> pauses{0};
  std::mutex mu;
  std::map<std::string, std::uint64_t, std::less<>> hits;  // guarded by mu
};

std::mutex g_mu;  // serializes installing and removing
std::atomic<State*> g_state{nullptr};
std::atomic<int> g_inflight{0};  // threads inside hook(): the destructor waits for them
std::atomic<std::uint64_t> g_epoch{0};

struct ThreadRng {
  std::uint64_t epoch = 0;
  std::mt19937_64 rng;
};
thread_local ThreadRng t_rng;

std::uint64_t mix(std::uint64_t x) {
  // splitmix64's finalizer: spreads neighbouring seeds far apart.
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

void pause_at(State* s, const char* where) noexcept;

void hook(const char* where) noexcept {
  g_inflight.fetch_add(1);
  if (State* s = g_state.load()) pause_at(s, where);
  g_inflight.fetch_sub(1);
}

void pause_at(State* s, const char* where) noexcept {
  const std::string_view name(where);
  {
    const std::lock_guard<std::mutex> lock(s->mu);
    auto it = s->hits.find(name);
    if (it == s->hits.end()) it = s->hits.emplace(std::string(name), 0).first;
    ++it->second;
  }
  for (const RaceSchedule::Action& a : s->options.actions) {
    if (name.find(a.point) != std::string_view::npos) a.action();
  }
  if (!s->options.only.empty() && name.find(s->options.only) == std::string_view::npos) return;
  if (t_rng.epoch != s->epoch) {
    t_rng.epoch = s->epoch;
    t_rng.rng.seed(mix(s->options.seed ^ mix(s->next_thread.fetch_add(1) + 1)));
  }
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  if (coin(t_rng.rng) >= s->options.pause_probability) return;
  s->pauses.fetch_add(1, std::memory_order_relaxed);
  std::uniform_int_distribution<long> micros(0, s->options.max_pause.count());
  const long pause = micros(t_rng.rng);
  if (pause < s->options.max_pause.count() / 4) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(pause));
  }
}

}  // namespace

RaceSchedule::RaceSchedule(Options options) {
  const std::lock_guard<std::mutex> lock(g_mu);
  if (g_state.load() != nullptr) throw std::logic_error("RaceSchedule: one is already installed");
  auto* s = new State;
  s->options = std::move(options);
  s->epoch = g_epoch.fetch_add(1) + 1;
  g_state.store(s);
  detail::set_race_point_hook(&hook);
}

RaceSchedule::~RaceSchedule() {
  const std::lock_guard<std::mutex> lock(g_mu);
  detail::set_race_point_hook(nullptr);
  State* s = g_state.exchange(nullptr);
  while (g_inflight.load() != 0)
    std::this_thread::yield();  // a thread still pausing in it
  delete s;
}

std::uint64_t RaceSchedule::hits(std::string_view part) const {
  State* s = g_state.load();
  const std::lock_guard<std::mutex> lock(s->mu);
  std::uint64_t n = 0;
  for (const auto& [name, count] : s->hits) {
    if (name.find(part) != std::string::npos) n += count;
  }
  return n;
}

std::uint64_t RaceSchedule::pauses() const {
  return g_state.load()->pauses.load();
}

std::uint64_t RaceSchedule::seed(std::uint64_t i) {
  std::uint64_t base = 1;
  if (const char* env = std::getenv("PURGATORY_RACE_SEED")) base = std::strtoull(env, nullptr, 0);
  return mix(base ^ mix(i));
}

}  // namespace purgatory::test
