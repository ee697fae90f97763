#include "load_client.hpp"

#include <stdexcept>
#include <thread>

#include <fmt/core.h>

namespace grpc_bench {

namespace pb = purgatory::examples;

LoadClient::LoadClient(std::uint16_t port, int channels) {
  const std::string target = fmt::format("127.0.0.1:{}", port);
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    // A subchannel pool per channel: each channel its own TCP connection, so that the parked
    // calls spread over several HTTP/2 connections.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);  // loopback only, whatever the environment says
    auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      throw std::runtime_error("cannot connect to " + target);
    }
    stubs_.push_back(pb::Mailbox::NewStub(channel));
  }
}

LoadClient::~LoadClient() {
  drain(std::chrono::seconds(30));
}

pb::Mailbox::Stub& LoadClient::next_stub() {
  return *stubs_[next_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
}

namespace {

template <class Request, class Reply>
struct Call {
  grpc::ClientContext context;
  Request request;
  Reply reply;
};

}  // namespace

void LoadClient::wait(const std::string& key, std::uint32_t timeout_ms, bool published) {
  auto* call = new Call<pb::WaitRequest, pb::WaitReply>;
  call->request.set_key(key);
  call->request.set_timeout_ms(timeout_ms);
  tally_.issued.fetch_add(1, std::memory_order_relaxed);
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  next_stub().async()->Wait(
      &call->context, &call->request, &call->reply, [this, call, published](grpc::Status status) {
        const std::string& value = call->reply.value();
        const std::string& its_key = call->request.key();
        const bool of_its_key = value.size() > its_key.size() &&
                                value.compare(0, its_key.size(), its_key) == 0 &&
                                value[its_key.size()] == '#';
        if (!status.ok()) {
          tally_.wrong.fetch_add(1, std::memory_order_relaxed);
        } else if (published && call->reply.outcome() == pb::WaitReply::COMPLETED && of_its_key) {
          tally_.completed.fetch_add(1, std::memory_order_relaxed);
        } else if (!published && call->reply.outcome() == pb::WaitReply::EXPIRED) {
          tally_.expired.fetch_add(1, std::memory_order_relaxed);
        } else {
          tally_.wrong.fetch_add(1, std::memory_order_relaxed);
        }
        delete call;
        tally_.answered.fetch_add(1, std::memory_order_relaxed);
        outstanding_.fetch_sub(1, std::memory_order_release);
      });
}

void LoadClient::publish(const std::string& key) {
  auto* call = new Call<pb::PublishRequest, pb::PublishReply>;
  call->request.set_key(key);
  call->request.set_value(
      fmt::format("{}#{}", key, published_.fetch_add(1, std::memory_order_relaxed)));
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  next_stub().async()->Publish(&call->context, &call->request, &call->reply,
                               [this, call](grpc::Status status) {
                                 if (!status.ok()) {
                                   tally_.publishes_failed.fetch_add(1, std::memory_order_relaxed);
                                 }
                                 delete call;
                                 outstanding_.fetch_sub(1, std::memory_order_release);
                               });
}

std::optional<pb::StatsReply> LoadClient::stats() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::StatsReply reply;
  if (!stubs_.front()->Stats(&context, pb::StatsRequest(), &reply).ok()) return std::nullopt;
  return reply;
}

bool LoadClient::drain(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (outstanding_.load(std::memory_order_acquire) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace grpc_bench
