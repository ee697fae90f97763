// A long-poll in one page: a coroutine waits up to 2 s for news; a value published after 100 ms
// completes the wait early. One thread, no timer thread; io.run() returns when both are done.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include <boost/asio.hpp>
#include <purgatory/asio.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

int main() {
  asio::io_context io;
  purgatory::AsioTimer timer(io);                                  // runs on io, no thread
  purgatory::DelayedOperationPurgatory<std::string> waits(timer);  // watch lists per key
  std::map<std::string, std::string> mailbox;

  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto op = purgatory::make_operation(2s, [&] { return mailbox.contains("news"); });
        auto how = co_await waits.async_watch(op, "news", asio::use_awaitable);
        std::printf("%s: %s\n", to_string(how).data(), mailbox["news"].c_str());
      },
      asio::detached);

  asio::steady_timer publisher(io, 100ms);
  publisher.async_wait([&](boost::system::error_code) {
    mailbox["news"] = "hello";
    waits.check_and_complete("news");  // completes the waiting operation now
  });
  io.run();
}
