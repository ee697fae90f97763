#include "purgatory/timer/executor.hpp"

#include <pthread.h>

#include <cstdio>

namespace purgatory {

void ExpiredTask::operator()() noexcept {
  if (!task_) return;
  TaskRef task = std::move(task_);
  // Claim the run: only the job issued for the task's current queued state may start it. A
  // cancel() or re-add in between changed the state, and then the run is withdrawn.
  std::uint32_t expected = ticket_;
  if (!task->state_.compare_exchange_strong(
          expected, TimerTask::with_phase(ticket_, TimerTask::kIdle), std::memory_order_acq_rel)) {
    return;
  }
  try {
    task->run();
  } catch (...) {
    try {
      if (on_error_ && *on_error_) {
        (*on_error_)(*task, std::current_exception());
      }
    } catch (...) {
      std::fputs("purgatory: the task error handler threw; error dropped\n", stderr);
    }
  }
}

void InlineExecutor::execute(std::vector<ExpiredTask>& batch) {
  for (ExpiredTask& job : batch)
    job();
  batch.clear();
}

ThreadExecutor::ThreadExecutor(std::string name) {
  worker_ = std::thread([this] { work(); });
  name.resize(std::min<std::size_t>(name.size(), 15));
  pthread_setname_np(worker_.native_handle(), name.c_str());
}

ThreadExecutor::~ThreadExecutor() {
  shutdown();
}

void ThreadExecutor::execute(std::vector<ExpiredTask>& batch) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (!stopping_) {
      for (ExpiredTask& job : batch)
        queue_.push_back(std::move(job));
      batch.clear();
    }
  }
  if (batch.empty()) {
    cv_.notify_one();
    return;
  }
  // Shut down already: nothing may be lost, so the caller's thread runs the jobs.
  for (ExpiredTask& job : batch)
    job();
  batch.clear();
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
    ExpiredTask job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace purgatory
