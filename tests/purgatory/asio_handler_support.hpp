// Handlers for the tests of purgatory/asio.hpp (its contract tests and its race tests): a
// recorder of what a completion handler received, on a given executor, with or without a
// cancellation slot.
#pragma once

#include <atomic>
#include <thread>

#include <boost/asio.hpp>

#include "purgatory/asio.hpp"
#include "purgatory_contract_support.hpp"

namespace purgatory::test {

namespace asio = boost::asio;

inline const boost::system::error_code kAborted = asio::error::operation_aborted;

// What a handler received, and how often.
struct Received {
  std::atomic<int> calls{0};
  boost::system::error_code ec;
  Outcome outcome = Outcome::pending;
  std::thread::id thread;
  bool callbacks_had_run = false;
};

template <class Executor>
auto recorder(Executor ex, Received& r, const contract::Probe* op = nullptr) {
  return asio::bind_executor(ex, [&r, op](boost::system::error_code ec, Outcome o) {
    r.ec = ec;
    r.outcome = o;
    r.thread = std::this_thread::get_id();
    r.callbacks_had_run = op != nullptr && op->callbacks_done.load();
    r.calls.fetch_add(1);
  });
}

// A recorder whose cancellation slot is `signal`'s.
template <class Executor>
auto cancellable(asio::cancellation_signal& signal, Executor ex, Received& r,
                 const contract::Probe* op = nullptr) {
  return asio::bind_cancellation_slot(signal.slot(), recorder(ex, r, op));
}

}  // namespace purgatory::test
