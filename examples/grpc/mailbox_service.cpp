#include "mailbox_service.hpp"

#include <pthread.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <limits>
#include <string_view>
#include <utility>

#include <fmt/core.h>

namespace mailbox {

namespace pb = purgatory::examples;

std::uint64_t MailboxValues::sequence(const std::string& key) const {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.sequence;
}

std::optional<std::string> MailboxValues::published_after(const std::string& key,
                                                          std::uint64_t seen) const {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.sequence == seen) return std::nullopt;
  return it->second.value;
}

MailboxValues::Latest MailboxValues::latest(const std::string& key) const {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  return it == entries_.end() ? Latest{} : it->second;
}

void MailboxValues::publish(const std::string& key, std::string value) {
  const std::lock_guard lock(mutex_);
  Latest& entry = entries_[key];
  ++entry.sequence;
  entry.value = std::move(value);
}

namespace {

grpc::ServerUnaryReactor* finish_now(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

grpc::Status empty_key() {
  return {grpc::StatusCode::INVALID_ARGUMENT, "key: must not be empty"};
}

}  // namespace

grpc::ServerUnaryReactor* MailboxService::Wait(grpc::CallbackServerContext* context,
                                               const pb::WaitRequest* request,
                                               pb::WaitReply* reply) {
  if (request->key().empty()) return finish_now(context, empty_key());
  if (request->timeout_ms() > kMaxTimeoutMs) {
    return finish_now(context, {grpc::StatusCode::INVALID_ARGUMENT,
                                fmt::format("timeout_ms: {} is outside [0, {}]",
                                            request->timeout_ms(), kMaxTimeoutMs)});
  }
  return waits_.wait(context, request->key(), std::chrono::milliseconds(request->timeout_ms()),
                     reply);
}

grpc::ServerUnaryReactor* MailboxService::Publish(grpc::CallbackServerContext* context,
                                                  const pb::PublishRequest* request,
                                                  pb::PublishReply* reply) {
  if (request->key().empty()) return finish_now(context, empty_key());
  values_.publish(request->key(), request->value());
  const std::size_t woken = waits_.wake(request->key());
  reply->set_completed(static_cast<std::uint32_t>(
      std::min<std::size_t>(woken, std::numeric_limits<std::uint32_t>::max())));
  return finish_now(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* MailboxService::Stats(grpc::CallbackServerContext* context,
                                                const pb::StatsRequest* /*request*/,
                                                pb::StatsReply* reply) {
  const Counters c = waits_.counters();
  reply->set_waiting(c.waiting);
  reply->set_completed(c.completed);
  reply->set_expired(c.expired);
  reply->set_cancelled(c.cancelled);
  return finish_now(context, grpc::Status::OK);
}

namespace {

std::optional<std::uint16_t> parse_port(int argc, char** argv) {
  if (argc == 1) return 0;
  if (argc != 3 || std::string_view(argv[1]) != "--port") return std::nullopt;
  const std::string_view text(argv[2]);
  unsigned port = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (error != std::errc() || end != text.data() + text.size() || port > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(port);
}

}  // namespace

int serve(int argc, char** argv, const char* program,
          const std::function<std::unique_ptr<Waits>(MailboxValues&)>& make_waits) {
  const std::optional<std::uint16_t> port = parse_port(argc, argv);
  if (!port) {
    fmt::print(stderr, "usage: {} [--port N]   (N in [0, 65535]; 0: any free port)\n", program);
    return 2;
  }
  // Blocked before any thread starts (the purgatory's timer threads, gRPC's), so that every
  // thread inherits the mask and the signals wait for sigwait() below instead of killing us.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  MailboxValues values;
  const std::unique_ptr<Waits> waits = make_waits(values);
  MailboxService service(values, *waits);
  int bound_port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(fmt::format("127.0.0.1:{}", *port), grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.RegisterService(&service);
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    fmt::print(stderr, "{}: cannot listen on 127.0.0.1:{}\n", program, *port);
    return 1;
  }
  fmt::print("listening on 127.0.0.1:{}\n", bound_port);
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  fmt::print("{}: signal {}, stopping\n", program, signal);
  std::fflush(stdout);
  // Every parked Wait is answered first, so that the server's shutdown below finds no call it
  // would have to cancel; a Wait arriving meanwhile is answered SHUTTING_DOWN by `waits`.
  waits->shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();

  const Counters c = waits->counters();
  fmt::print("{}: stopped: waiting {} completed {} expired {} cancelled {}\n", program, c.waiting,
             c.completed, c.expired, c.cancelled);
  std::fflush(stdout);
  return 0;
}

}  // namespace mailbox
