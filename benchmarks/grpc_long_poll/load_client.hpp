// The benchmark's load: Waits and Publishes issued without waiting for their answers, on gRPC's
// C++ callback client API over several channels (each its own connection), every answer checked.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "mailbox.grpc.pb.h"

namespace grpc_bench {

/// What the answers were so far. A Wait on a key the load publishes must come back COMPLETED
/// with a value of that key ("KEY#N"); one on a key nobody publishes, EXPIRED.
struct Tally {
  std::atomic<std::uint64_t> issued{0};     ///< Waits sent
  std::atomic<std::uint64_t> answered{0};   ///< Waits answered, right or wrong
  std::atomic<std::uint64_t> completed{0};  ///< COMPLETED with a value of its key, as expected
  std::atomic<std::uint64_t> expired{0};    ///< EXPIRED, as expected
  std::atomic<std::uint64_t> wrong{0};      ///< any other answer, or an RPC error
  std::atomic<std::uint64_t> publishes_failed{0};
};

/// Issues the load. Thread-safe; the callbacks run on gRPC's threads.
class LoadClient {
 public:
  /// Connects `channels` channels to 127.0.0.1:port (throws std::runtime_error if one does not
  /// connect within 10 s).
  LoadClient(std::uint16_t port, int channels);
  /// Waits (up to 30 s) for the answers still owed, so that no callback outlives the client.
  ~LoadClient();
  LoadClient(const LoadClient&) = delete;
  LoadClient& operator=(const LoadClient&) = delete;

  /// Sends Wait(key, timeout_ms); `published` says which answer it must get.
  void wait(const std::string& key, std::uint32_t timeout_ms, bool published);
  /// Sends Publish(key, "KEY#N").
  void publish(const std::string& key);
  /// Stats, answered synchronously (nothing on error).
  std::optional<purgatory::examples::StatsReply> stats();
  /// Whether every Wait and Publish sent has its answer within `limit`.
  bool drain(std::chrono::milliseconds limit);

  [[nodiscard]] const Tally& tally() const { return tally_; }

 private:
  purgatory::examples::Mailbox::Stub& next_stub();

  std::vector<std::unique_ptr<purgatory::examples::Mailbox::Stub>> stubs_;
  std::atomic<std::uint64_t> next_{0};
  std::atomic<std::uint64_t> outstanding_{0};  // Waits and Publishes not answered yet
  std::atomic<std::uint64_t> published_{0};
  Tally tally_;
};

}  // namespace grpc_bench
