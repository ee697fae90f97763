// A long-poll service on gRPC's callback API (mailbox.proto): each parked Wait is a
// purgatory::DelayedOperation in a DelayedOperationPurgatory, answered by a Publish on its key,
// its timeout, or the server's shutdown; a client that cancels, or whose deadline passes,
// withdraws it at once.
//
//   grpc_long_poll_server [--port N]   serves on 127.0.0.1:N (default 0: the OS picks; the first
//                                      line printed says which)
//   SIGINT or SIGTERM                  every parked Wait is answered SHUTTING_DOWN, the server
//                                      stops, its last line holds the counters, exit status 0
//
// mailbox_service.hpp has the service around the waiting (the checks, Publish, Stats, the
// process); purgatory_waits.hpp the waiting, which is what this example shows.

#include <memory>

#include "mailbox_service.hpp"
#include "purgatory_waits.hpp"

int main(int argc, char** argv) {
  return mailbox::serve(argc, argv, "grpc_long_poll_server", [](mailbox::MailboxValues& values) {
    return std::make_unique<mailbox::PurgatoryWaits>(values);
  });
}
