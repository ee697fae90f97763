// A client connection to the broker whose every request must get exactly one response: requests
// are queued and written in order, and each response is matched to its request by correlation id
// (an unknown or already answered id is a failure). Call only from the io_context's thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include "failures.hpp"
#include "load_stats.hpp"
#include "protocol/codec.hpp"

namespace broker_load {

namespace asio = boost::asio;
namespace pb = purgatory::broker;

enum class Kind { metadata, produce, fetch };

class Conn {
 public:
  // A response to a request of `kind` sent at `sent`.
  using OnResponse = std::function<void(Kind, pb::ByteView payload, Clock::time_point sent)>;

  Conn(asio::io_context& io, std::string name, Failures& failures)
      : socket_(io), name_(std::move(name)), failures_(failures) {}

  void connect(std::uint16_t port, std::function<void()> on_connected, OnResponse on_response);
  template <class Req>
  void send(const Req& req, std::int16_t version, Kind kind) {
    const std::int32_t corr = next_corr_++;
    if (!outstanding_.emplace(corr, Pending{kind, Clock::now()}).second) {
      failures_.add(fmt::format("{}: correlation id {} reused", name_, corr));
    }
    queue_.push_back(pb::encode_request(req, version, corr, name_));
    write();
  }
  // Requests sent and not answered yet.
  [[nodiscard]] std::size_t outstanding() const { return outstanding_.size(); }
  void close() {
    boost::system::error_code ec;
    socket_.close(ec);
  }

 private:
  struct Pending {
    Kind kind;
    Clock::time_point sent;
  };

  void write();
  void read_size();
  void on_frame();
  void on_error(const boost::system::error_code& ec);

  asio::ip::tcp::socket socket_;
  std::string name_;
  Failures& failures_;
  OnResponse on_response_;
  std::int32_t next_corr_ = 1;
  std::unordered_map<std::int32_t, Pending> outstanding_;
  std::deque<pb::Bytes> queue_;
  bool writing_ = false;
  std::array<std::uint8_t, 4> prefix_{};
  pb::Bytes payload_;
};

}  // namespace broker_load
