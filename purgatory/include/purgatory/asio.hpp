// Asio integration: wait for an operation's outcome with a completion token.
//
//   auto outcome = co_await purgatory::async_wait_outcome(op, boost::asio::use_awaitable);
//   purgatory::async_wait_outcome(op, [](purgatory::Outcome o) { ... });  // or any token
//
// The handler runs once, after on_complete()/on_expiration(), on its associated executor (posted,
// never inline in the thread that completed the operation), and the wait counts as outstanding
// work of that executor, so io_context::run() does not return while an operation is awaited.
// Not cancellable: the operation always ends (completed, expired or shut down), so the wait does.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (g++ 12, C++20).
#include <utility>

#include <memory>
#include <type_traits>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "purgatory/delayed_operation.hpp"

namespace purgatory {

namespace detail {

template <class Handler>
class AsioOutcomeListener final : public OutcomeListener {
 public:
  explicit AsioOutcomeListener(Handler handler)
      : handler_(std::move(handler)),
        work_(boost::asio::make_work_guard(boost::asio::get_associated_executor(handler_))) {}

  void on_outcome(Outcome outcome) noexcept override {
    auto executor = work_.get_executor();
    boost::asio::post(executor, [handler = std::move(handler_), work = std::move(work_),
                                 outcome]() mutable { std::move(handler)(outcome); });
  }

 private:
  Handler handler_;
  boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work_;
};

}  // namespace detail

// Initiates a wait for `op`'s outcome; completion signature void(Outcome). At most one wait per
// operation (it uses the operation's single outcome listener): a second throws std::logic_error.
template <class CompletionToken>
auto async_wait_outcome(const OperationRef& op, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(Outcome)>(
      [](auto handler, const OperationRef& target) {
        using Handler = std::decay_t<decltype(handler)>;
        target->set_outcome_listener(
            std::make_unique<detail::AsioOutcomeListener<Handler>>(std::move(handler)));
      },
      token, op);
}

}  // namespace purgatory
