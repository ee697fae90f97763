// Connection: one client socket of the demo broker. Reads request frames and hands them to its
// RequestDispatcher (the Broker); writes the responses strictly in request order, as Kafka does,
// however they complete.
//
// Ordering: each request takes a response slot at the back of a queue when it is read. A handler
// fills its slot at once, or a delayed operation fills it later from a purgatory callback; the
// connection writes the filled slots at the head of the queue, one async_write at a time. So a
// Fetch parked for 5 s holds back the responses of the requests read after it on the same
// connection, exactly like a Kafka broker (which reads one request per connection at a time).
//
// Memory: a slot holds a finished frame (the small responses: Produce, Metadata, ...), no response
// (Produce acks=0), or a builder (Fetch). A builder is turned into bytes only when its slot is at
// the head of the queue and no write is in flight, and one write gathers frames only until they
// pass kMaxGatherBytes. So the fetch responses a connection holds in memory are those of the one
// write in flight: frames adding up to less than kMaxGatherBytes, plus the one that passed it. A
// client that pipelines 64 Fetches of a 24 MiB log and never reads costs one response, not 64. The
// builder reads the log as it is when it runs; see DelayedFetch for why that is still the answer
// Kafka would give.
//
// Disconnects: on EOF or any socket error the connection closes once: it force-completes the
// operations still parked for it (they see is_open() == false and write nothing), drops its
// queue (builders never run), and tells its dispatcher, which forgets it. A frame that cannot be
// decoded closes it too, with a log line, and so does a builder that throws.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "protocol/codec.hpp"
#include "protocol/framing.hpp"
#include "purgatory/delayed_operation.hpp"
#include "requests/logger.hpp"
#include "requests/responder.hpp"
#include "server/request_dispatcher.hpp"

namespace purgatory::broker {

// How a server's connections read and answer, shared by all of them: the limits, and the
// injected fault (counted over every connection). The Broker owns it and outlives every open
// connection. Call only from the broker's io thread.
struct ConnectionPolicy {
  std::int32_t max_request_bytes = kDefaultMaxFrameBytes;  // Kafka's socket.request.max.bytes
  // Requests read but not yet answered; reading pauses beyond this (TCP pushes back).
  std::size_t max_in_flight = 64;
  // BrokerConfig::fault_drop_produce_response_every: every Nth Produce response is not written,
  // the connection is closed instead. 0: off.
  std::uint32_t drop_produce_response_every = 0;
  std::uint64_t produce_responses = 0;  // counted for the fault

  // True when the Produce response about to be written is the one to drop.
  [[nodiscard]] bool drop_this_produce_response() noexcept {
    return drop_produce_response_every != 0 &&
           ++produce_responses % drop_produce_response_every == 0;
  }
};

// Call only from the broker's io thread.
class Connection final : public Responder, public std::enable_shared_from_this<Connection> {
 public:
  using Socket = boost::asio::ip::tcp::socket;

  // `dispatcher`, `policy` and `logger` must outlive every call into the connection while it is
  // open (a closed one touches none of them).
  Connection(Socket socket, std::uint64_t id, RequestDispatcher& dispatcher,
             ConnectionPolicy& policy, const Logger& logger);

  // Starts reading requests.
  void start();
  // Closes the socket and completes every parked operation (they write nothing). Idempotent.
  void close(std::string_view reason) override;
  [[nodiscard]] bool is_open() const noexcept override { return open_; }
  [[nodiscard]] std::uint64_t id() const noexcept override { return id_; }
  [[nodiscard]] const std::string& peer() const noexcept override { return peer_; }

  // Takes the next response slot, for a request with `header`.
  ResponseSlot open_slot(const RequestHeader& header);
  // `op` answers `slot` later; if the client leaves first, close() force-completes it.
  void park(const ResponseSlot& slot, OperationRef op) override;
  // Fills the slot with a complete response frame; `outcome` is for the request log line. A
  // closed connection drops it.
  void respond(const ResponseSlot& slot, Bytes frame, std::string_view outcome) override;
  // Fills the slot with a response built later, by `builder`, once every response before it has
  // been written and no write is in flight; `outcome` starts its request log line, which is
  // written then. A closed connection drops it without calling `builder`.
  void respond_deferred(const ResponseSlot& slot, std::string outcome,
                        ResponseBuilder builder) override;
  // Fills the slot with no response at all (a Produce with acks=0).
  void respond_nothing(const ResponseSlot& slot, std::string_view outcome) override;

 private:
  // One write gathers the frames ready at the head of the queue until they pass this many bytes
  // (at least one frame, however big), so it never builds many large fetch responses at once.
  static constexpr std::size_t kMaxGatherBytes = 1024 * 1024;

  // A deferred response waiting for its turn, and the start of its request log line.
  struct Deferred {
    ResponseBuilder builder;
    std::string outcome;
    std::chrono::steady_clock::duration waited{};  // from read to filled, as for the others
  };
  // No response (acks=0), a finished frame, or one to build when its turn comes.
  using Response = std::variant<std::monostate, Bytes, Deferred>;

  struct Slot {
    std::uint64_t seq = 0;
    RequestHeader header;
    std::chrono::steady_clock::time_point received;
    bool ready = false;
    Response response;
    OperationRef parked;
  };

  void read_size();
  void on_size(const boost::system::error_code& ec);
  void on_payload(const boost::system::error_code& ec);
  void fill(const ResponseSlot& slot, Response response, std::string_view outcome);
  // Writes the filled slots at the head of the queue, unless a write is in flight: up to
  // kMaxGatherBytes of them in one async_write, building deferred responses on the way.
  void flush();
  // Runs the head slot's builder; nullopt when it threw (the connection is closed then).
  std::optional<Bytes> build(Slot& slot);
  void log_request(const Slot& slot, std::string_view outcome,
                   std::chrono::steady_clock::duration waited) const;
  void resume_reading_if_paused();
  [[nodiscard]] Slot* find(std::uint64_t seq);

  Socket socket_;
  const std::uint64_t id_;
  std::string peer_;
  RequestDispatcher& dispatcher_;
  ConnectionPolicy& policy_;
  const Logger& logger_;
  bool open_ = true;
  bool writing_ = false;
  bool read_paused_ = false;
  std::array<std::uint8_t, 4> size_prefix_{};
  Bytes payload_;
  std::deque<Slot> slots_;
  std::uint64_t next_seq_ = 0;
  std::vector<Bytes> writing_frames_;  // owned by the async_write in flight
};

}  // namespace purgatory::broker
