#include "server/connection.hpp"

#include <fmt/format.h>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

namespace purgatory::broker {

namespace {

// A payload buffer bigger than this is released after use rather than kept for the next frame.
constexpr std::size_t kKeepPayloadBytes = 1024 * 1024;

std::string describe_peer(const Connection::Socket& socket) {
  boost::system::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  if (ec) return "?";
  return fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

}  // namespace

Connection::Connection(Socket socket, std::uint64_t id, RequestDispatcher& dispatcher,
                       ConnectionPolicy& policy, const Logger& logger)
    : socket_(std::move(socket)),
      id_(id),
      peer_(describe_peer(socket_)),
      dispatcher_(dispatcher),
      policy_(policy),
      logger_(logger) {
  boost::system::error_code ec;
  socket_.set_option(boost::asio::ip::tcp::no_delay(true), ec);  // responses are small and late
}

void Connection::start() {
  read_size();
}

void Connection::read_size() {
  boost::asio::async_read(socket_, boost::asio::buffer(size_prefix_),
                          [self = shared_from_this()](const boost::system::error_code& ec,
                                                      std::size_t) { self->on_size(ec); });
}

void Connection::on_size(const boost::system::error_code& ec) {
  if (!open_) return;
  if (ec) {
    close(ec == boost::asio::error::eof ? "client closed the connection" : ec.message());
    return;
  }
  std::int32_t size = 0;
  try {
    size = decode_frame_size(size_prefix_, policy_.max_request_bytes, kMinRequestFrameBytes);
  } catch (const DecodeError& e) {
    // Refused before anything of that size is allocated (socket.request.max.bytes).
    dispatcher_.on_malformed_frame(*this);
    logger_.log(fmt::format("conn {} {}: malformed frame, closing: {}", id_, peer_, e.what()));
    close("malformed frame");
    return;
  }
  payload_.resize(static_cast<std::size_t>(size));
  boost::asio::async_read(socket_, boost::asio::buffer(payload_),
                          [self = shared_from_this()](const boost::system::error_code& e,
                                                      std::size_t) { self->on_payload(e); });
}

void Connection::on_payload(const boost::system::error_code& ec) {
  if (!open_) return;
  if (ec) {
    close(ec == boost::asio::error::eof ? "client closed the connection mid-frame" : ec.message());
    return;
  }
  dispatcher_.dispatch(*this, payload_);
  if (payload_.capacity() > kKeepPayloadBytes) {
    payload_ = Bytes();
  }
  if (!open_) return;
  if (slots_.size() >= policy_.max_in_flight) {
    read_paused_ = true;  // flush() resumes once responses drain
    return;
  }
  read_size();
}

void Connection::resume_reading_if_paused() {
  if (!read_paused_ || !open_ || slots_.size() >= policy_.max_in_flight) {
    return;
  }
  read_paused_ = false;
  read_size();
}

ResponseSlot Connection::open_slot(const RequestHeader& header) {
  Slot slot;
  slot.seq = next_seq_++;
  slot.header = header;
  slot.received = std::chrono::steady_clock::now();
  slots_.push_back(std::move(slot));
  return ResponseSlot{shared_from_this(), slots_.back().seq, header.api_version,
                      header.correlation_id};
}

Connection::Slot* Connection::find(std::uint64_t seq) {
  if (slots_.empty() || seq < slots_.front().seq) return nullptr;
  const std::uint64_t index = seq - slots_.front().seq;
  return index < slots_.size() ? &slots_[index] : nullptr;
}

void Connection::park(const ResponseSlot& slot, OperationRef op) {
  if (Slot* s = find(slot.seq); s != nullptr && !s->ready) s->parked = std::move(op);
}

void Connection::respond(const ResponseSlot& slot, Bytes frame, std::string_view outcome) {
  const Slot* s = open_ ? find(slot.seq) : nullptr;
  if (s != nullptr && !s->ready && s->header.api_key == ApiKey::produce &&
      policy_.drop_this_produce_response()) {
    // The injected fault: the append happened, the answer is lost with the connection.
    logger_.log(fmt::format(
        "conn {} {}: fault: Produce v{} corr={} ({}) not answered, closing the connection "
        "instead (--fault-drop-produce-response {})",
        id_, peer_, slot.version, slot.correlation_id, outcome,
        policy_.drop_produce_response_every));
    close("fault: produce response dropped");
    return;
  }
  fill(slot, std::move(frame), outcome);
}

void Connection::respond_deferred(const ResponseSlot& slot, std::string outcome,
                                  ResponseBuilder builder) {
  fill(slot, Deferred{std::move(builder), std::move(outcome), {}}, {});
}

void Connection::respond_nothing(const ResponseSlot& slot, std::string_view outcome) {
  fill(slot, std::monostate{}, outcome);
}

void Connection::log_request(const Slot& slot, std::string_view outcome,
                             std::chrono::steady_clock::duration waited) const {
  const std::chrono::duration<double, std::milli> ms = waited;
  logger_.log(fmt::format("conn {} {} [{}] {} v{} corr={}: {} (waited {:.1f} ms)", id_, peer_,
                          slot.header.client_id.value_or(""), api_key_name(slot.header.api_key),
                          slot.header.api_version, slot.header.correlation_id, outcome,
                          ms.count()));
}

void Connection::fill(const ResponseSlot& slot, Response response, std::string_view outcome) {
  auto* deferred = std::get_if<Deferred>(&response);
  if (deferred != nullptr) outcome = deferred->outcome;
  Slot* s = open_ ? find(slot.seq) : nullptr;
  if (s == nullptr || s->ready) {
    if (logger_.verbose()) {
      logger_.log(fmt::format("conn {} {}: corr={}: {}; nothing written", id_, peer_,
                              slot.correlation_id, outcome));
    }
    return;
  }
  const auto waited = std::chrono::steady_clock::now() - s->received;
  if (deferred != nullptr) {
    deferred->waited = waited;  // logged once built, with what it served
  } else if (logger_.verbose()) {
    log_request(*s, outcome, waited);
  }
  s->ready = true;
  s->response = std::move(response);
  s->parked.reset();  // breaks the connection <-> operation cycle
  flush();
}

std::optional<Bytes> Connection::build(Slot& slot) {
  Deferred& deferred = std::get<Deferred>(slot.response);
  std::optional<Bytes> frame;
  std::string error;
  try {
    frame = deferred.builder(deferred.outcome);
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "a non-std exception";
  }
  if (frame) {
    if (logger_.verbose()) log_request(slot, deferred.outcome, deferred.waited);
    return frame;
  }
  // As for a request that fails to be served: that connection pays, the broker goes on.
  logger_.log(fmt::format("conn {} {}: error building the {} v{} response (corr={}), closing: {}",
                          id_, peer_, api_key_name(slot.header.api_key), slot.header.api_version,
                          slot.header.correlation_id, error));
  close("internal error");
  return std::nullopt;
}

void Connection::flush() {
  if (writing_ || !open_) return;
  writing_frames_.clear();
  std::size_t gathered = 0;
  while (gathered < kMaxGatherBytes && !slots_.empty() && slots_.front().ready) {
    Slot& head = slots_.front();
    if (std::holds_alternative<Deferred>(head.response)) {
      // Built only now: its turn has come and nothing is being written.
      std::optional<Bytes> frame = build(head);
      if (!frame) {
        writing_frames_.clear();
        return;  // closed
      }
      head.response = std::move(*frame);
    }
    if (Bytes* frame = std::get_if<Bytes>(&head.response)) {
      gathered += frame->size();
      writing_frames_.push_back(std::move(*frame));
    }
    slots_.pop_front();
  }
  resume_reading_if_paused();
  if (writing_frames_.empty()) return;
  std::vector<boost::asio::const_buffer> buffers;
  buffers.reserve(writing_frames_.size());
  for (const Bytes& f : writing_frames_)
    buffers.emplace_back(boost::asio::buffer(f));
  writing_ = true;
  boost::asio::async_write(
      socket_, buffers,
      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
        self->writing_ = false;
        self->writing_frames_.clear();
        if (!self->open_) return;
        if (ec) {
          self->close(ec.message());
          return;
        }
        self->flush();
      });
}

void Connection::close(std::string_view reason) {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ec;
  socket_.shutdown(Socket::shutdown_both, ec);
  socket_.close(ec);
  std::vector<OperationRef> parked;
  for (Slot& s : slots_) {
    if (s.parked) parked.push_back(std::move(s.parked));
    const auto* deferred = std::get_if<Deferred>(&s.response);
    if (deferred != nullptr && logger_.verbose()) {
      // Its request line was waiting for the build, which will not happen now.
      log_request(s, deferred->outcome + "; nothing written", deferred->waited);
    }
  }
  slots_.clear();
  if (logger_.verbose()) {
    logger_.log(fmt::format(
        "conn {} {}: closed ({}){}", id_, peer_, reason,
        parked.empty() ? std::string()
                       : fmt::format(", completing {} parked operation(s)", parked.size())));
  }
  // Their on_complete() sees is_open() == false and writes nothing; the purgatory lets go of
  // them, and with them of this connection.
  for (const OperationRef& op : parked)
    op->force_complete();
  dispatcher_.on_connection_closed(*this, parked.size());
}

}  // namespace purgatory::broker
