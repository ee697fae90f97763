#include "purgatory/timer/executor.hpp"

#include <cstdio>
#include <utility>

#include "batch_context.hpp"
#include "platform/thread_name.hpp"
#include "purgatory/timer/detail/race_point.hpp"

namespace purgatory {

ExpiredBatch::ExpiredBatch(ExpiredBatch&& other) noexcept
    : jobs_(std::move(other.jobs_)),
      context_(std::move(other.context_)),
      in_flight_(std::exchange(other.in_flight_, false)) {}

ExpiredBatch& ExpiredBatch::operator=(ExpiredBatch&& other) noexcept {
  if (this != &other) {
    const ExpiredBatch dropped(std::move(*this));
    jobs_ = std::move(other.jobs_);
    context_ = std::move(other.context_);
    in_flight_ = std::exchange(other.in_flight_, false);
  }
  return *this;
}

ExpiredBatch::~ExpiredBatch() {
  jobs_.clear();  // the tasks' references first: a drain() woken below finds them released
  land();
}

void ExpiredBatch::land() noexcept {
  if (!std::exchange(in_flight_, false)) return;
  detail::BatchContext& context = *context_;
  // Sequentially consistent with drain()'s store of `watched` and its read of the count: either
  // it sees this decrement, or we see it watching and wake it.
  if (context.in_flight.fetch_sub(1) == 1 && context.watched.load()) {
    const std::lock_guard<std::mutex> guard(context.mu);
    if (context.timer != nullptr) context.timer->on_clock_advanced();  // "look again"
  }
}

bool ExpiredBatch::claim(TimerTask& task, std::uint32_t ticket, bool single_thread) noexcept {
  std::uint64_t w = task.word_.load(std::memory_order_acquire);
  if (single_thread) {
    if (TimerTask::state_of(w) != ticket) return false;
    task.word_.store(TimerTask::make_word(TimerTask::with_phase(ticket, TimerTask::kIdle),
                                          TimerTask::refs_of(w)),
                     std::memory_order_relaxed);
    return true;
  }
  while (TimerTask::state_of(w) == ticket) {  // the count may change meanwhile; the state not
    if (task.word_.compare_exchange_weak(
            w,
            TimerTask::make_word(TimerTask::with_phase(ticket, TimerTask::kIdle),
                                 TimerTask::refs_of(w)),
            std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

void ExpiredBatch::run_all() noexcept {
  const bool single_thread = context_ && context_->single_thread;
  for (Job& job : jobs_) {
    TimerTask& task = *job.task;
    PURGATORY_RACE_POINT("ExpiredBatch::run_all: before the claim");
    // Claim the run: only the batch issued for the task's current queued state may start it. A
    // cancel() or re-add in between changed the state, and then the run is withdrawn.
    if (claim(task, job.ticket, single_thread)) {
      PURGATORY_RACE_POINT("ExpiredBatch::run_all: claimed, before run");
      try {
        task.run();
      } catch (...) {
        try {
          if (context_ && context_->on_error) context_->on_error(task, std::current_exception());
        } catch (...) {
          std::fputs("purgatory: the task error handler threw; error dropped\n", stderr);
        }
      }
    }
    job.task.reset();
  }
  jobs_.clear();
  land();
}

ThreadExecutor::ThreadExecutor(std::string name) {
  worker_ = platform::start_named_thread(std::move(name), [this] { work(); });
}

ThreadExecutor::~ThreadExecutor() {
  shutdown();
}

void ThreadExecutor::execute(ExpiredBatch& batch) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (!stopping_) {
      queue_.push_back(std::move(batch));
      batch = ExpiredBatch();
    }
  }
  if (batch.empty()) {
    cv_.notify_one();
    return;
  }
  // Shut down already: nothing may be lost, so the caller's thread runs the batch.
  batch.run_all();
}

void ThreadExecutor::shutdown() {
  {
    std::lock_guard<std::mutex> guard(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (worker_.joinable()) worker_.join();
}

void ThreadExecutor::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    ExpiredBatch batch = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    batch.run_all();
    lock.lock();
  }
}

}  // namespace purgatory
