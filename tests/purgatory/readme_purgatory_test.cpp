// README.md, "Using the purgatory" and the purgatory's lines elsewhere: the example as written,
// on a real clock, and the claims it makes. Claims a header makes too are held by that header's
// tests (docs/contracts.md).
#include <purgatory/delayed_operation_purgatory.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include <doctest/doctest.h>

#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

// The README's log: bytes after an offset.
class Log {
 public:
  std::size_t bytes_after(std::size_t offset) const {
    const std::lock_guard<std::mutex> lock(mu_);
    return size_ > offset ? size_ - offset : 0;
  }
  void append(std::size_t bytes) {
    const std::lock_guard<std::mutex> lock(mu_);
    size_ += bytes;
  }

 private:
  mutable std::mutex mu_;
  std::size_t size_ = 0;
};

TEST_CASE(
    "README: the long-poll fetch example: completes once 1000 bytes are available when the key "
    "is checked, or after 500 ms with what there is, each gets exactly one response") {
  // The README writes PurgatoryOptions{.name = "fetch"}; -Wextra (this build) warns about the
  // members a designated initializer leaves out, so the same options are spelled out here.
  purgatory::PurgatoryOptions options;
  options.name = "fetch";
  purgatory::DelayedOperationPurgatory<std::string> fetches(options);  // owns a SystemTimer
  Log log;
  const std::size_t offset = 0;
  std::atomic<int> responses{0};
  std::atomic<purgatory::Outcome> how{purgatory::Outcome::pending};
  std::atomic<std::size_t> sent{0};
  auto respond = [&](std::size_t bytes, purgatory::Outcome o) {
    sent = bytes;
    how = o;
    responses.fetch_add(1);
  };
  auto op = purgatory::make_operation(
      500ms,
      /*try_complete:*/ [&] { return log.bytes_after(offset) >= 1000; },
      /*on_complete:*/ [&](purgatory::Outcome o) { respond(log.bytes_after(offset), o); });
  CHECK_FALSE(fetches.try_complete_else_watch(op, {"orders-0"}));  // try, watch, try, time it
  log.append(400);
  CHECK(fetches.check_and_complete("orders-0") == 0);  // not yet satisfiable
  log.append(600);
  CHECK(fetches.check_and_complete("orders-0") == 1);  // completes every one now satisfiable
  CHECK(responses == 1);
  CHECK(how.load() == purgatory::Outcome::completed);
  CHECK(sent == 1000);

  // The same request when nothing more arrives: after 500 ms, with what there is.
  Log quiet;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<std::chrono::steady_clock::time_point> responded{};
  auto slow = purgatory::make_operation(
      500ms, [&] { return quiet.bytes_after(offset) >= 1000; },
      [&](purgatory::Outcome o) {
        how = o;
        responded = std::chrono::steady_clock::now();
        responses.fetch_add(1);
      });
  fetches.try_complete_else_watch(slow, {"orders-1"});
  REQUIRE(eventually([&] { return responses.load() == 2; }));
  CHECK(how.load() == purgatory::Outcome::expired);
  CHECK(responded.load() - start >= 500ms);  // never early
  CHECK(fetches.metrics().completed_total == 1);
  CHECK(fetches.metrics().expired_total == 1);
}

TEST_CASE(
    "README: no library lock is held while your callbacks run, except the operation's own lock "
    "around its try_complete(): each callback (and the error handler) may take every shard lock") {
  PurgatoryOptions options;
  options.name = "fetch";
  DelayedOperationPurgatory<std::string>* fetches = nullptr;
  // A shard lock held by this thread would deadlock here (snapshot() takes every one in turn).
  auto use_every_shard = [&] {
    (void)fetches->check_and_complete("elsewhere");
    (void)fetches->snapshot();
  };
  std::atomic<int> errors{0};
  std::atomic<bool> error_with_lock{false};
  options.on_callback_error = [&](const DelayedOperation& op, std::exception_ptr,
                                  std::string_view) {
    if (op.lock_held_by_current_thread()) error_with_lock = true;
    use_every_shard();
    errors.fetch_add(1);
  };
  ManualTimer manual;
  DelayedOperationPurgatory<std::string> purgatory(manual.timer, options);
  fetches = &purgatory;
  std::atomic<bool> throw_once{false};
  auto hooks = [&](const contract::ProbeRef& op) {
    op->on_try = [&] {
      use_every_shard();
      if (throw_once.exchange(false)) throw std::runtime_error("log unavailable");
      return false;
    };
    op->on_done = use_every_shard;
    op->on_expired = use_every_shard;
  };
  auto fetch = contract::probe(500ms);
  auto slow = contract::probe(500ms);
  hooks(fetch);
  hooks(slow);
  purgatory.try_complete_else_watch(fetch, {"orders-0"});
  purgatory.try_complete_else_watch(slow, {"orders-1"});
  throw_once = true;
  CHECK(purgatory.check_and_complete("orders-0") == 0);  // try_complete() throws: reported
  fetch->completable = true;
  CHECK(purgatory.check_and_complete("orders-0") == 1);
  manual.advance(500ms);  // slow expires
  CHECK(fetch->outcome() == Outcome::completed);
  CHECK(slow->outcome() == Outcome::expired);
  CHECK(errors == 1);
  CHECK_FALSE(error_with_lock.load());
  for (const auto& op : {fetch, slow}) {
    CHECK_FALSE(op->try_without_lock.load());    // try_complete(): the operation's lock, held
    CHECK_FALSE(op->callback_with_lock.load());  // on_complete(), on_expiration(): none
    CHECK(op->callbacks_done.load());
  }
}

TEST_CASE(
    "README: a DelayedOperation subclass (try_complete, on_complete, on_expiration, as in Kafka) "
    "and a purgatory sharing the application's timer") {
  ManualTimer manual;  // the timer a server would share between its purgatories
  PurgatoryOptions produce_options;
  produce_options.name = "produce";
  PurgatoryOptions fetch_options;
  fetch_options.name = "fetch";
  DelayedOperationPurgatory<std::string> produce(manual.timer, produce_options);
  DelayedOperationPurgatory<std::string> fetch(manual.timer, fetch_options);
  auto a = mock(100ms);
  auto b = mock(100ms);
  produce.try_complete_else_watch(a, {"orders-0"});
  fetch.try_complete_else_watch(b, {"orders-0"});
  a->completable = true;
  CHECK(produce.check_and_complete("orders-0") == 1);  // one purgatory's key is its own
  CHECK(b->outcome() == Outcome::pending);
  manual.advance(100ms);
  CHECK(b->outcome() == Outcome::expired);
  CHECK(b->expirations == 1);
  CHECK(a->expirations == 0);
}

}  // namespace
}  // namespace purgatory::test
