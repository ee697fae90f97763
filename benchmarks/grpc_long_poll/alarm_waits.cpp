#include "alarm_waits.hpp"

#include <optional>
#include <utility>
#include <vector>

#include <grpcpp/alarm.h>

namespace grpc_bench {

namespace pb = purgatory::examples;

// A parked call: its reactor, its alarm, and its place in its key's list.
//
// Exactly once: whoever claims the call (claim(): one atomic exchange) answers it, and only they:
// a Publish (wake()), the alarm (expired), gRPC's OnCancel() (withdrawn) or the shutdown. The
// object is freed when both gRPC (OnDone(), after Finish()) and the alarm (its callback runs once,
// fired or cancelled) are done with it: two references.
class AlarmWait final : public grpc::ServerUnaryReactor {
 public:
  AlarmWait(AlarmWaits& owner, std::string key, std::uint64_t seen, pb::WaitReply* reply)
      : owner_(owner), key_(std::move(key)), seen_(seen), reply_(reply) {}

  [[nodiscard]] const std::string& key() const { return key_; }
  [[nodiscard]] std::uint64_t seen() const { return seen_; }
  bool claim() { return !claimed_.exchange(true, std::memory_order_acq_rel); }
  [[nodiscard]] bool claimed() const { return claimed_.load(std::memory_order_acquire); }

  // Sets the alarm; before the call is on a list, so that Cancel() never races Set().
  void arm(std::chrono::milliseconds timeout) {
    refs_.fetch_add(1, std::memory_order_relaxed);
    alarm_.Set(std::chrono::system_clock::now() + timeout, [this](bool fired) {
      if (fired && claim()) {
        owner_.unpark(*this);
        owner_.expired_.fetch_add(1, std::memory_order_relaxed);
        reply_->set_outcome(pb::WaitReply::EXPIRED);
        Finish(grpc::Status::OK);
      }
      release();
    });
  }

  // The claimer's answer: COMPLETED with `value`, or SHUTTING_DOWN without one.
  void answer(std::optional<std::string> value) {
    alarm_.Cancel();
    if (value) {
      reply_->set_outcome(pb::WaitReply::COMPLETED);
      reply_->set_value(std::move(*value));
    } else {
      reply_->set_outcome(pb::WaitReply::SHUTTING_DOWN);
    }
    Finish(grpc::Status::OK);
  }

  // Guarded by the owner's mutex.
  std::list<AlarmWait*>::iterator where;
  bool parked = false;

 private:
  void OnCancel() override {
    if (!claim()) return;
    owner_.unpark(*this);
    owner_.cancelled_.fetch_add(1, std::memory_order_relaxed);
    alarm_.Cancel();
    Finish(grpc::Status::CANCELLED);
  }
  void OnDone() override { release(); }
  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  AlarmWaits& owner_;
  const std::string key_;
  const std::uint64_t seen_;
  pb::WaitReply* const reply_;
  std::atomic<int> refs_{1};  // gRPC's, plus the alarm's once armed
  std::atomic<bool> claimed_{false};
  grpc::Alarm alarm_;
};

grpc::ServerUnaryReactor* AlarmWaits::wait(grpc::CallbackServerContext* /*context*/,
                                           std::string key, std::chrono::milliseconds timeout,
                                           pb::WaitReply* reply) {
  const std::uint64_t seen = values_.sequence(key);
  auto* call = new AlarmWait(*this, std::move(key), seen, reply);
  call->arm(timeout);  // it may fire before the call is parked: then it is claimed already
  std::optional<std::string> value;
  bool answer_now = false;
  {
    const std::lock_guard lock(mutex_);
    if (call->claimed()) return call;  // expired already (a timeout of 0)
    // Checked again under the lock that a Publish takes after storing its value: a value that
    // came before is seen here, one that comes after finds the call on the list.
    value = values_.published_after(call->key(), seen);
    if (shutting_down_ || value) {
      answer_now = call->claim();
    } else {
      std::list<AlarmWait*>& list = parked_[call->key()];
      call->where = list.insert(list.end(), call);
      call->parked = true;
      ++waiting_;
    }
  }
  if (answer_now) {
    if (value) completed_.fetch_add(1, std::memory_order_relaxed);
    call->answer(std::move(value));
  }
  return call;
}

void AlarmWaits::unpark(AlarmWait& call) {
  const std::lock_guard lock(mutex_);
  if (!call.parked) return;
  const auto list = parked_.find(call.key());
  list->second.erase(call.where);
  if (list->second.empty()) parked_.erase(list);
  call.parked = false;
  --waiting_;
}

std::size_t AlarmWaits::wake(const std::string& key) {
  std::vector<AlarmWait*> claimed;
  std::string value;
  {
    const std::lock_guard lock(mutex_);
    const auto list = parked_.find(key);
    if (list == parked_.end()) return 0;
    // Read under the lock: every call on the list had seen no newer value when it was put there,
    // so a sequence newer than the one it saw is a value published since. A call that came after
    // this Publish's value (a Publish whose wake runs late) stays for the next one.
    mailbox::MailboxValues::Latest latest = values_.latest(key);
    value = std::move(latest.value);
    for (auto it = list->second.begin(); it != list->second.end();) {
      AlarmWait* call = *it;
      if (call->seen() >= latest.sequence) {
        ++it;
        continue;
      }
      it = list->second.erase(it);
      call->parked = false;
      --waiting_;
      if (call->claim()) claimed.push_back(call);  // else its claimer answers it
    }
    if (list->second.empty()) parked_.erase(list);
  }
  // Claimed calls stay alive until they are finished: gRPC's reference goes in OnDone().
  for (AlarmWait* call : claimed) {
    completed_.fetch_add(1, std::memory_order_relaxed);
    call->answer(value);
  }
  return claimed.size();
}

mailbox::Counters AlarmWaits::counters() const {
  mailbox::Counters c;
  {
    const std::lock_guard lock(mutex_);
    c.waiting = waiting_;
  }
  c.completed = completed_.load(std::memory_order_relaxed);
  c.expired = expired_.load(std::memory_order_relaxed);
  c.cancelled = cancelled_.load(std::memory_order_relaxed);
  return c;
}

void AlarmWaits::shutdown() {
  std::vector<AlarmWait*> claimed;
  {
    const std::lock_guard lock(mutex_);
    shutting_down_ = true;
    for (auto& [key, list] : parked_) {
      for (AlarmWait* call : list) {
        call->parked = false;
        if (call->claim()) claimed.push_back(call);
      }
    }
    parked_.clear();
    waiting_ = 0;
  }
  for (AlarmWait* call : claimed)
    call->answer(std::nullopt);
}

}  // namespace grpc_bench
