// What a gRPC user writes today to park a long-poll call, for the benchmark to compare with the
// purgatory: one grpc::Alarm per parked call (gRPC's own timer, set with a callback) for its
// timeout, and a hand-kept map of the calls waiting on each key under one mutex, which a
// Publish empties. The rest of the server is the example's (mailbox_service.hpp), so the two
// servers differ only in how a call waits.
//
// As in the purgatory's server, every call is answered exactly once whatever races (a Publish,
// the alarm, the client's cancel or deadline, the shutdown): each of those first claims the call
// with one atomic exchange and only the winner answers; no lock is held while a call finishes. A
// deadline shorter than the timeout is left to gRPC's own cancel (OnCancel()), as such code
// usually does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "mailbox_service.hpp"

namespace grpc_bench {

class AlarmWait;

/// Waits with one grpc::Alarm per call and a map of the waiting calls per key. Thread-safe.
class AlarmWaits final : public mailbox::Waits {
 public:
  explicit AlarmWaits(const mailbox::MailboxValues& values) : values_(values) {}

  grpc::ServerUnaryReactor* wait(grpc::CallbackServerContext* context, std::string key,
                                 std::chrono::milliseconds timeout,
                                 purgatory::examples::WaitReply* reply) override;
  std::size_t wake(const std::string& key) override;
  [[nodiscard]] mailbox::Counters counters() const override;
  void shutdown() override;

 private:
  friend class AlarmWait;
  // Takes `call` off its key's list if it is still on it (a Publish or the shutdown may have
  // taken the whole list already).
  void unpark(AlarmWait& call);

  const mailbox::MailboxValues& values_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::list<AlarmWait*>> parked_;  // guarded by mutex_
  std::size_t waiting_ = 0;                                        // guarded by mutex_
  bool shutting_down_ = false;                                     // guarded by mutex_
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> expired_{0};
  std::atomic<std::uint64_t> cancelled_{0};
};

}  // namespace grpc_bench
