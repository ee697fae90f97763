// grpc_long_poll_alarm_server [--port N]: the example's Mailbox server (mailbox_service.hpp), its
// Waits parked with one grpc::Alarm per call and a map of waiting calls per key (alarm_waits.hpp)
// instead of the purgatory: the alternative the benchmark measures the purgatory against.

#include <memory>

#include "alarm_waits.hpp"
#include "mailbox_service.hpp"

int main(int argc, char** argv) {
  return mailbox::serve(argc, argv, "grpc_long_poll_alarm_server",
                        [](mailbox::MailboxValues& values) {
                          return std::make_unique<grpc_bench::AlarmWaits>(values);
                        });
}
