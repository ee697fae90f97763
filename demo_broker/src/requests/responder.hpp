// Responder: where the answers of a client's requests go. requests/ owns this interface and
// server/'s Connection implements it, so the request handlers and their delayed operations never
// see a socket (the dependency points from server/ to requests/, not back). The live view's
// control requests (the page's "produce" and "long-poll fetch" buttons) have a Responder of their
// own that writes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "protocol/codec.hpp"
#include "purgatory/delayed_operation.hpp"

namespace purgatory::broker {

class Responder;

// Where one request's answer goes: a responder and the slot its request took there. Holding it
// keeps the responder object (not the socket) alive. A plain value, thread-compatible.
struct ResponseSlot {
  std::shared_ptr<Responder> conn;
  std::uint64_t seq = 0;
  std::int16_t version = 0;
  std::int32_t correlation_id = 0;
};

// A response encoded only when its turn to be written comes (Responder::respond_deferred). Builds
// the whole frame from the broker's state as it is when called, and appends to `outcome` what it
// served (for the request log line). Called at most once, on the io thread, from inside the
// responder; it must not call back into it. May throw: the connection is closed.
using ResponseBuilder = std::function<Bytes(std::string& outcome)>;

// Call only from the broker's io thread.
class Responder {
 public:
  Responder() = default;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  virtual ~Responder() = default;

  [[nodiscard]] virtual bool is_open() const noexcept = 0;
  [[nodiscard]] virtual std::uint64_t id() const noexcept = 0;
  // Who is asking: "127.0.0.1:53412", or "ui" for the live view's controls.
  [[nodiscard]] virtual const std::string& peer() const noexcept = 0;
  // Stops answering (the socket closes) and completes every parked operation. Idempotent.
  virtual void close(std::string_view reason) = 0;

  // `op` answers `slot` later; if the client leaves first, close() force-completes it.
  virtual void park(const ResponseSlot& slot, OperationRef op) = 0;
  // Fills the slot with a complete response frame; `outcome` is for the request log line. A
  // closed responder drops it.
  virtual void respond(const ResponseSlot& slot, Bytes frame, std::string_view outcome) = 0;
  // Fills the slot with a response built later, by `builder`, once every response before it has
  // been written; `outcome` starts its request log line. A closed responder drops it without
  // calling `builder`.
  virtual void respond_deferred(const ResponseSlot& slot, std::string outcome,
                                ResponseBuilder builder) = 0;
  // Fills the slot with no response at all (a Produce with acks=0).
  virtual void respond_nothing(const ResponseSlot& slot, std::string_view outcome) = 0;
};

}  // namespace purgatory::broker
