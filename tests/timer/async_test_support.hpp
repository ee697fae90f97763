// Helpers for the tests of timer/async.hpp: what a cancelled wait completes with, and a recorder
// of completions whose handlers run on an io_context.
#pragma once

#include <chrono>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include "manual_timer.hpp"

namespace purgatory::test {

inline const boost::system::error_code kAborted = boost::asio::error::operation_aborted;

// Records every completion of the waits it hands handlers for; the handlers run on `io`.
struct Completions {
  boost::asio::io_context& io;
  std::vector<boost::system::error_code> seen;

  auto handler() {
    return boost::asio::bind_executor(io,
                                      [this](boost::system::error_code ec) { seen.push_back(ec); });
  }
};

// Runs `io` as its thread would while `m`'s driver runs beside it: handlers, then an expiry pass
// at the same clock reading, until `io` has no work left or `rounds` are spent.
inline void run_driving(boost::asio::io_context& io, ManualTimer& m, int rounds = 1000) {
  for (int i = 0; i < rounds && !io.stopped(); ++i) {
    (void)io.poll();
    m.advance(std::chrono::nanoseconds::zero());
  }
}

}  // namespace purgatory::test
