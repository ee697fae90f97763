// The Mailbox service of mailbox.proto on gRPC's callback API, apart from how a Wait waits.
//
// Everything a long-poll server needs but the waiting itself lives here: the values published
// per key (MailboxValues), the checks of each request, Publish and Stats, and the process around
// the service (the port, the signals, the shutdown). How a parked Wait waits is a `Waits`: the
// example's is purgatory_waits.hpp (a DelayedOperation per call in a DelayedOperationPurgatory);
// benchmarks/grpc_long_poll/ has the usual alternative (one grpc::Alarm per call and a map of
// waiting calls under a mutex), so that the two servers differ in nothing else.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <grpcpp/grpcpp.h>

#include "mailbox.grpc.pb.h"

namespace mailbox {

/// The longest timeout_ms a Wait may ask for.
constexpr std::uint32_t kMaxTimeoutMs = 60'000;

/// The latest value published on each key, numbered per key, so that a Wait can tell a value
/// published after it arrived from one that was there before. Every key ever published keeps its
/// latest value (a mailbox, not a queue). Thread-safe.
class MailboxValues {
 public:
  /// How many values were published on `key` so far (0 for none): what a Wait arriving now has
  /// seen.
  [[nodiscard]] std::uint64_t sequence(const std::string& key) const;
  /// The latest value on `key` if one was published after `seen` (a sequence()).
  [[nodiscard]] std::optional<std::string> published_after(const std::string& key,
                                                           std::uint64_t seen) const;
  /// The latest value on `key` and its sequence() (0 and "" for none).
  struct Latest {
    std::uint64_t sequence = 0;
    std::string value;
  };
  [[nodiscard]] Latest latest(const std::string& key) const;
  /// Stores `value` as the latest on `key`.
  void publish(const std::string& key, std::string value);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Latest> entries_;  // guarded by mutex_
};

/// What Stats answers.
struct Counters {
  std::uint64_t waiting = 0;    ///< Waits parked now
  std::uint64_t completed = 0;  ///< answered COMPLETED by a Publish
  std::uint64_t expired = 0;    ///< answered EXPIRED: timeout_ms passed
  std::uint64_t cancelled = 0;  ///< withdrawn: the client cancelled, or its deadline passed
};

/// How a Wait waits: parks the call until a value is published on its key after it arrived
/// (COMPLETED with that value), its timeout passes (EXPIRED), the client cancels or its deadline
/// passes (withdrawn: counted in Counters::cancelled, nobody to answer), or shutdown()
/// (SHUTTING_DOWN), whichever comes first; answers it exactly once, never holding a lock of its
/// own while the reactor finishes. Thread-safe: gRPC's threads call every member concurrently.
class Waits {
 public:
  Waits() = default;
  Waits(const Waits&) = delete;
  Waits& operator=(const Waits&) = delete;
  virtual ~Waits() = default;

  /// Parks the call of `context` on `key` (not empty), timeout in [0, kMaxTimeoutMs]; the reactor
  /// it returns answers into `reply`.
  virtual grpc::ServerUnaryReactor* wait(grpc::CallbackServerContext* context, std::string key,
                                         std::chrono::milliseconds timeout,
                                         purgatory::examples::WaitReply* reply) = 0;
  /// Called by Publish once it has stored a value on `key`: answers the calls parked there that
  /// it can; returns how many this call answered.
  virtual std::size_t wake(const std::string& key) = 0;
  [[nodiscard]] virtual Counters counters() const = 0;
  /// Answers every parked call SHUTTING_DOWN and returns once it has; a Wait arriving later is
  /// answered SHUTTING_DOWN at once.
  virtual void shutdown() = 0;
};

/// The service: checks each request, then Wait goes to `waits`, Publish stores the value in
/// `values` and wakes the key, Stats reads waits.counters(). A bad request gets INVALID_ARGUMENT
/// with a message that names the field. Thread-safe.
class MailboxService final : public purgatory::examples::Mailbox::CallbackService {
 public:
  MailboxService(MailboxValues& values, Waits& waits) : values_(values), waits_(waits) {}

  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const purgatory::examples::WaitRequest* request,
                                 purgatory::examples::WaitReply* reply) override;
  grpc::ServerUnaryReactor* Publish(grpc::CallbackServerContext* context,
                                    const purgatory::examples::PublishRequest* request,
                                    purgatory::examples::PublishReply* reply) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const purgatory::examples::StatsRequest* request,
                                  purgatory::examples::StatsReply* reply) override;

 private:
  MailboxValues& values_;
  Waits& waits_;
};

/// A program serving the Mailbox on 127.0.0.1: `<program> [--port N]` (0, the default: the OS
/// picks). Blocks SIGINT and SIGTERM in every thread (before make_waits() starts any), prints
/// `listening on 127.0.0.1:PORT` as its first line, serves until one of those signals, then
/// answers every parked Wait SHUTTING_DOWN (Waits::shutdown()), shuts the gRPC server down and
/// prints the counters. Returns the exit status: 0 after a signal, 2 for bad arguments, 1 when it
/// cannot listen.
int serve(int argc, char** argv, const char* program,
          const std::function<std::unique_ptr<Waits>(MailboxValues&)>& make_waits);

}  // namespace mailbox
