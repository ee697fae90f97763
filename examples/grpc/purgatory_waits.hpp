// How a Wait waits in grpc_long_poll_server: as a purgatory::DelayedOperation in a
// DelayedOperationPurgatory<std::string>, watched on its key.
//
// Each parked call is one object, ParkedWait (purgatory_waits.cpp), which is both the call's
// grpc::ServerUnaryReactor and its DelayedOperation: its try_complete() reads the mailbox, its
// on_complete() answers the call, and gRPC's OnCancel() (the client cancelled, or the call's
// deadline passed) cancels the operation. A Publish stores its value and calls
// check_and_complete(key); the purgatory's timer expires the operation after timeout_ms;
// shutdown() gives every parked one Outcome::shut_down. Whatever happens first is the one outcome
// the operation gets, so the call is answered exactly once.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "mailbox_service.hpp"
#include "purgatory/delayed_operation_purgatory.hpp"

namespace mailbox {

/// Waits on a DelayedOperationPurgatory (with a timer of its own: a reaper and an executor
/// thread). Thread-safe, as every Waits.
class PurgatoryWaits final : public Waits {
 public:
  explicit PurgatoryWaits(const MailboxValues& values);

  grpc::ServerUnaryReactor* wait(grpc::CallbackServerContext* context, std::string key,
                                 std::chrono::milliseconds timeout,
                                 purgatory::examples::WaitReply* reply) override;
  std::size_t wake(const std::string& key) override;
  /// waiting: num_delayed(); completed, expired, cancelled: the purgatory's metrics().
  [[nodiscard]] Counters counters() const override;
  void shutdown() override;

 private:
  const MailboxValues& values_;
  // The parked calls, one operation each, watched on their key.
  purgatory::DelayedOperationPurgatory<std::string> waits_;
  // For a call whose gRPC deadline comes before its timeout_ms: a guard operation that never
  // completes, expires at the deadline and then cancels the call's operation (see wait()). On
  // waits_'s timer; its counters are not the service's.
  purgatory::DelayedOperationPurgatory<std::string> deadlines_;
};

}  // namespace mailbox
