#include "purgatory_waits.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <utility>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/errors.hpp"
#include "purgatory/outcome.hpp"

namespace mailbox {

namespace pb = purgatory::examples;
using purgatory::Outcome;

namespace {

// The timeout of an operation that must not expire: a Wait bound by its deadline (see
// PurgatoryWaits::wait()). Longer than any deadline that can bind a Wait (those come before
// timeout_ms, at most kMaxTimeoutMs away), so that the guard always ends such a Wait first.
constexpr std::chrono::milliseconds kNeverExpires{4 * kMaxTimeoutMs};

// A parked Wait: the call's reactor and its delayed operation in one object (one allocation per
// call, from the purgatory's operation pool).
//
// The invariant: Finish() is called in one place only, on_complete(), and the purgatory runs
// on_complete() exactly once per operation, whichever of these decides its outcome first:
//   - a Publish on the key: check_and_complete() finds try_complete() true -> completed;
//   - the timer: timeout_ms passed -> expired;
//   - gRPC's OnCancel() (the client cancelled, or the deadline passed) or the deadline guard
//     (deadline_passed()) -> cancel() -> cancelled;
//   - shutdown() -> shut_down;
//   - a Wait the purgatory refused (it had shut down): refuse() -> cancel() -> cancelled.
// The others then find the outcome decided and do nothing: cancel() returns false, the expiry
// and a check pass it by. The reactor stays alive until gRPC's OnDone(), which gRPC calls only
// after Finish() and after any OnCancel() has returned, so each of those paths still has its
// object; after Finish() on_complete() touches nothing of it. gRPC's hold on the object is
// `self_`, dropped in OnDone(); the purgatory and a guard hold Refs of their own while they may
// still call it.
//
// Locks: try_complete() runs under the operation's lock and takes the mailbox's; on_complete()
// runs with no lock of the library held (the purgatory's contract) and takes none of ours, so
// Finish() runs with no lock held.
class ParkedWait final : public purgatory::DelayedOperation, public grpc::ServerUnaryReactor {
 public:
  ParkedWait(const MailboxValues& values, std::string key, std::chrono::milliseconds timeout,
             pb::WaitReply* reply)
      : DelayedOperation(timeout),
        values_(values),
        key_(std::move(key)),
        seen_(values.sequence(key_)),
        reply_(reply) {}

  [[nodiscard]] const std::string& key() const { return key_; }

  // gRPC's hold on the object, from the handler's return until OnDone(). Before the call is
  // watched.
  void hold_for_grpc(purgatory::Ref<ParkedWait> self) { self_ = std::move(self); }
  // The operation that cancels this one at the call's deadline. Before the call is watched.
  void set_guard(purgatory::OperationRef guard) { guard_ = std::move(guard); }

  // Answers a call the purgatory would not watch (it threw, so the operation has no outcome):
  // through cancel(), so that on_complete() stays the one place that finishes the call.
  void refuse(bool shutting_down) {
    refused_ = shutting_down ? Refused::shutting_down : Refused::out_of_memory;
    cancel();
  }

  // The guard's expiry: the deadline passed while the call waited. The call ends as gRPC's own
  // deadline ends one, DEADLINE_EXCEEDED, whichever of the two is first: our timer may be a hair
  // ahead of gRPC's, and a client must not see CANCELLED for a deadline it set.
  void deadline_passed() {
    // Relaxed: on_complete() reads it in the cancel() below, on this thread; if OnCancel()'s
    // cancel() won, gRPC has ended the call already and the status we give is not sent.
    deadline_passed_.store(true, std::memory_order_relaxed);
    cancel();
  }

 protected:
  // A value published on the key after the call arrived completes it.
  bool try_complete() override {
    std::optional<std::string> value = values_.published_after(key_, seen_);
    if (!value) return false;
    reply_->set_value(std::move(*value));  // under the operation's lock, before the outcome
    return true;
  }

  void on_complete() override {
    // The guard has nothing left to do: cancelling it frees its timer slot now rather than at
    // the deadline (a no-op when it is the guard's expiry that cancelled this call).
    if (purgatory::OperationRef guard = std::move(guard_)) guard->cancel();
    grpc::Status status = grpc::Status::OK;
    switch (outcome()) {
      case Outcome::completed:
        reply_->set_outcome(pb::WaitReply::COMPLETED);
        break;
      case Outcome::expired:
        reply_->set_outcome(pb::WaitReply::EXPIRED);
        break;
      case Outcome::shut_down:
        reply_->set_outcome(pb::WaitReply::SHUTTING_DOWN);
        break;
      case Outcome::cancelled:
      case Outcome::pending:  // (on_complete() never sees it)
        if (refused_ == Refused::shutting_down) {
          reply_->set_outcome(pb::WaitReply::SHUTTING_DOWN);
        } else if (refused_ == Refused::out_of_memory) {
          status = {grpc::StatusCode::RESOURCE_EXHAUSTED, "the server is out of memory"};
        } else if (deadline_passed_.load(std::memory_order_relaxed)) {
          status = {grpc::StatusCode::DEADLINE_EXCEEDED, "the deadline passed while it waited"};
        } else {
          status = grpc::Status::CANCELLED;  // nobody reads it: the client is gone
        }
        break;
    }
    Finish(std::move(status));  // the last use of *this: OnDone() may free it from here on
  }

 private:
  enum class Refused : std::uint8_t { no, shutting_down, out_of_memory };

  void OnCancel() override { cancel(); }
  void OnDone() override {
    purgatory::Ref<ParkedWait> last = std::move(self_);  // may free *this when it goes
  }

  const MailboxValues& values_;
  const std::string key_;
  const std::uint64_t seen_;  // the key's sequence when the call arrived
  pb::WaitReply* const reply_;
  purgatory::Ref<ParkedWait> self_;  // gRPC's hold (see the class comment)
  purgatory::OperationRef guard_;    // set before the watch, taken by on_complete()
  Refused refused_ = Refused::no;    // set before cancel(), read by the on_complete() it runs
  std::atomic<bool> deadline_passed_{false};  // set by the guard only (deadline_passed())
};

}  // namespace

PurgatoryWaits::PurgatoryWaits(const MailboxValues& values)
    : values_(values),
      waits_(purgatory::PurgatoryOptions{.name = "waits", .timer = {.name = "mailbox"}}),
      deadlines_(waits_.timer(), {.name = "deadlines"}) {}

// Which bound ends a Wait is settled when it arrives, so that the counters do not depend on a
// race between two timers (ours and gRPC's deadline):
//   - timeout_ms comes first (or there is no deadline): the operation's timeout is timeout_ms;
//     it expires then, before the deadline, and the call is answered EXPIRED. (Only a timeout
//     that ends within the timer's lateness, a tick or so, of the deadline can meet gRPC's cancel
//     first.)
//   - the deadline comes first: the call is withdrawn at the deadline and counted as cancelled,
//     as a client that gives up is. Its operation gets a timeout it never reaches
//     (kNeverExpires), so it cannot expire; a guard operation on the same timer expires at the
//     deadline and cancels it, and gRPC's own deadline (OnCancel()) cancels it too. Whichever is
//     first, the outcome is cancelled, and the operation does not outlive the deadline by more
//     than the timer's lateness even if gRPC's cancel is late. (Were the operation's timeout the
//     deadline itself, it would expire rather than be cancelled; were it timeout_ms, a timeout_ms
//     a hair after the deadline would race gRPC's cancel.)
grpc::ServerUnaryReactor* PurgatoryWaits::wait(grpc::CallbackServerContext* context,
                                               std::string key, std::chrono::milliseconds timeout,
                                               pb::WaitReply* reply) {
  const auto to_deadline = context->deadline() - std::chrono::system_clock::now();
  const bool deadline_first = to_deadline < timeout;
  auto call = purgatory::make_operation<ParkedWait>(
      values_, std::move(key), deadline_first ? kNeverExpires : timeout, reply);
  call->hold_for_grpc(call);
  purgatory::OperationRef guard;
  if (deadline_first) {
    guard = purgatory::make_operation(
        std::chrono::duration_cast<purgatory::Nanos>(to_deadline), [] { return false; },
        [call](Outcome outcome) {
          if (outcome == Outcome::expired) call->deadline_passed();
        });
    call->set_guard(guard);
  }
  try {
    waits_.try_complete_else_watch(call, call->key());
  } catch (const purgatory::PurgatoryShutDown&) {
    call->refuse(true);
    return call.get();
  } catch (const std::bad_alloc&) {
    call->refuse(false);
    return call.get();
  }
  if (guard) {
    try {
      // Nothing is watched when the call is answered already (its on_complete() cancelled the
      // guard): try_complete_else_watch() does not watch a completed operation.
      deadlines_.try_complete_else_watch(guard, call->key());
    } catch (const std::exception&) {
      // Shutting down, or out of memory: gRPC's own deadline still cancels the call.
    }
  }
  return call.get();
}

std::size_t PurgatoryWaits::wake(const std::string& key) {
  try {
    return waits_.check_and_complete(key);
  } catch (const purgatory::PurgatoryShutDown&) {
    return 0;  // every parked call was answered SHUTTING_DOWN
  }
}

Counters PurgatoryWaits::counters() const {
  const purgatory::PurgatoryMetrics m = waits_.metrics();
  return {.waiting = waits_.num_delayed(),
          .completed = m.completed_total,
          .expired = m.expired_total,
          .cancelled = m.cancelled_total};
}

void PurgatoryWaits::shutdown() {
  // The guards first, while the timer they are on still runs (waits_.shutdown() closes it).
  deadlines_.shutdown();
  waits_.shutdown();
}

}  // namespace mailbox
