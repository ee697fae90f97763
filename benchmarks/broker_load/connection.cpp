#include "connection.hpp"

#include <exception>

#include <boost/asio/buffer.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "protocol/framing.hpp"

namespace broker_load {

using boost::system::error_code;

void Conn::connect(std::uint16_t port, std::function<void()> on_connected, OnResponse on_response) {
  on_response_ = std::move(on_response);
  socket_.async_connect({asio::ip::make_address("127.0.0.1"), port},
                        [this, f = std::move(on_connected)](const error_code& ec) {
                          if (ec) {
                            failures_.add(fmt::format("{}: connect: {}", name_, ec.message()));
                            return;
                          }
                          socket_.set_option(asio::ip::tcp::no_delay(true));
                          read_size();
                          f();
                        });
}

void Conn::write() {
  if (writing_ || queue_.empty() || !socket_.is_open()) return;
  writing_ = true;
  asio::async_write(socket_, asio::buffer(queue_.front()),
                    [this](const error_code& ec, std::size_t) {
                      writing_ = false;
                      queue_.pop_front();
                      if (ec) {
                        if (socket_.is_open())
                          failures_.add(fmt::format("{}: write: {}", name_, ec.message()));
                        return;
                      }
                      write();
                    });
}

void Conn::read_size() {
  asio::async_read(socket_, asio::buffer(prefix_), [this](const error_code& ec, std::size_t) {
    if (ec) return on_error(ec);
    std::int32_t size = 0;
    try {
      size = pb::decode_frame_size(prefix_, pb::kDefaultMaxFrameBytes, pb::kMinResponseFrameBytes);
    } catch (const std::exception& e) {
      failures_.add(fmt::format("{}: {}", name_, e.what()));
      return close();
    }
    payload_.resize(static_cast<std::size_t>(size));
    asio::async_read(socket_, asio::buffer(payload_), [this](const error_code& e, std::size_t) {
      if (e) return on_error(e);
      on_frame();
      read_size();
    });
  });
}

void Conn::on_frame() {
  pb::Reader r(payload_);
  const std::int32_t corr = r.read_int32("correlation_id");
  const auto it = outstanding_.find(corr);
  if (it == outstanding_.end()) {
    failures_.add(
        fmt::format("{}: response for unknown or answered correlation id {}", name_, corr));
    return;
  }
  const Pending p = it->second;
  outstanding_.erase(it);
  try {
    on_response_(p.kind, payload_, p.sent);
  } catch (const std::exception& e) {
    failures_.add(fmt::format("{}: bad response (corr {}): {}", name_, corr, e.what()));
  }
}

void Conn::on_error(const error_code& ec) {
  if (!socket_.is_open() || ec == asio::error::operation_aborted) return;
  failures_.add(fmt::format("{}: connection lost: {}", name_, ec.message()));
  close();
}

}  // namespace broker_load
