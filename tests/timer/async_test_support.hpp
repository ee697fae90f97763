// Helpers for the tests of timer/async.hpp: what a cancelled wait completes with, and a recorder
// of completions whose handlers run on an io_context.
#pragma once

#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

namespace purgatory::test {

inline const boost::system::error_code kAborted = boost::asio::error::operation_aborted;

// Records every completion of the waits it hands handlers for; the handlers run on `io`.
struct Completions {
  boost::asio::io_context& io;
  std::vector<boost::system::error_code> seen;

  auto handler() {
    return boost::asio::bind_executor(
        io, [this](boost::system::error_code ec) { seen.push_back(ec); });
  }
};

}  // namespace purgatory::test
