#include "demo/client.hpp"

#include <array>

#include <fmt/format.h>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "protocol/framing.hpp"

namespace purgatory::broker {

namespace asio = boost::asio;
using boost::system::error_code;

Client::Client(std::string client_id) : client_id_(std::move(client_id)), socket_(io_) {}

Client::~Client() {
  close();
}

void Client::close() noexcept {
  error_code ec;
  socket_.close(ec);
  expected_.clear();
}

void Client::run_until(const bool& done, Duration timeout, const char* what) {
  io_.restart();
  io_.run_for(timeout);
  if (done) return;
  close();  // aborts the operation in flight
  io_.restart();
  io_.run();  // lets its handler see the abort before the buffers it uses go away
  throw ClientError(
      fmt::format("{}: no answer within {} ms", what,
                  std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
}

void Client::connect(const std::string& host, std::uint16_t port, Duration timeout) {
  close();
  const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(host), port);
  bool done = false;
  error_code result;
  socket_.async_connect(endpoint, [&](const error_code& ec) {
    result = ec;
    done = true;
  });
  run_until(done, timeout, "connect");
  if (result) {
    throw ClientError(fmt::format("connect to {}:{}: {}", host, port, result.message()));
  }
  socket_.set_option(asio::ip::tcp::no_delay(true), result);
}

void Client::write(ByteView bytes, Duration timeout) {
  if (!is_open()) throw ClientError("write: not connected");
  bool done = false;
  error_code result;
  asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()),
                    [&](const error_code& ec, std::size_t) {
                      result = ec;
                      done = true;
                    });
  run_until(done, timeout, "write");
  if (result) throw ClientError("write: " + result.message());
}

Bytes Client::receive_frame(Duration timeout) {
  if (!is_open()) throw ClientError("receive: not connected");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<std::uint8_t, 4> prefix{};
  bool done = false;
  error_code result;
  asio::async_read(socket_, asio::buffer(prefix), [&](const error_code& ec, std::size_t) {
    result = ec;
    done = true;
  });
  run_until(done, timeout, "receive");
  if (result) throw ClientError("receive: " + result.message());
  const std::int32_t size =
      decode_frame_size(prefix, kDefaultMaxFrameBytes, kMinResponseFrameBytes);
  Bytes payload(static_cast<std::size_t>(size));
  done = false;
  asio::async_read(socket_, asio::buffer(payload), [&](const error_code& ec, std::size_t) {
    result = ec;
    done = true;
  });
  const auto left = deadline - std::chrono::steady_clock::now();
  run_until(done, left > Duration::zero() ? left : Duration::zero(), "receive");
  if (result) throw ClientError("receive: " + result.message());
  return payload;
}

bool Client::closed_by_peer_within(Duration timeout) {
  if (!is_open()) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<std::uint8_t, 512> sink{};
  for (;;) {
    bool done = false;
    error_code result;
    socket_.async_read_some(asio::buffer(sink), [&](const error_code& ec, std::size_t) {
      result = ec;
      done = true;
    });
    const auto left = deadline - std::chrono::steady_clock::now();
    try {
      run_until(done, left > Duration::zero() ? left : Duration::zero(), "wait for close");
    } catch (const ClientError&) {
      return false;  // still open at the deadline (run_until closed our side)
    }
    if (result) {
      close();
      return true;  // EOF or reset: the peer closed it
    }
  }
}

void Client::check_correlation(std::int32_t id) {
  if (expected_.empty()) {
    throw ClientError(fmt::format("unexpected response with correlation id {}", id));
  }
  const std::int32_t want = expected_.front();
  expected_.pop_front();
  if (id != want) {
    throw ClientError(
        fmt::format("responses out of order: got correlation id {}, expected {}", id, want));
  }
}

ApiVersionsResponse Client::api_versions(std::int16_t version, Duration timeout) {
  send(ApiVersionsRequest{"purgatory-client", "0.1"}, version);
  return receive<ApiVersionsResponse>(version, timeout).body;
}

MetadataResponse Client::metadata(std::optional<std::vector<std::string>> topics,
                                  Duration timeout) {
  MetadataRequest req;
  req.topics = std::move(topics);
  send(req, kMetadataVersion);
  return receive<MetadataResponse>(kMetadataVersion, timeout).body;
}

ProduceResponse Client::produce(const ProduceRequest& req, Duration timeout) {
  send(req, kProduceVersion);
  return receive<ProduceResponse>(kProduceVersion, timeout).body;
}

FetchResponse Client::fetch(const FetchRequest& req, Duration timeout) {
  send(req, kFetchVersion);
  return receive<FetchResponse>(kFetchVersion, timeout).body;
}

ListOffsetsResponse Client::list_offsets(const ListOffsetsRequest& req, Duration timeout) {
  send(req, kListOffsetsVersion);
  return receive<ListOffsetsResponse>(kListOffsetsVersion, timeout).body;
}

InitProducerIdResponse Client::init_producer_id(Duration timeout) {
  send(InitProducerIdRequest{}, kInitProducerIdVersion);
  return receive<InitProducerIdResponse>(kInitProducerIdVersion, timeout).body;
}

FindCoordinatorResponse Client::find_coordinator(const std::string& group_id, Duration timeout) {
  send(FindCoordinatorRequest{group_id, kCoordinatorKeyGroup}, kFindCoordinatorVersion);
  return receive<FindCoordinatorResponse>(kFindCoordinatorVersion, timeout).body;
}

JoinGroupResponse Client::join_group(const JoinGroupRequest& req, Duration timeout) {
  send(req, kJoinGroupVersion);
  return receive<JoinGroupResponse>(kJoinGroupVersion, timeout).body;
}

SyncGroupResponse Client::sync_group(const SyncGroupRequest& req, Duration timeout) {
  send(req, kSyncGroupVersion);
  return receive<SyncGroupResponse>(kSyncGroupVersion, timeout).body;
}

Errc Client::heartbeat(const HeartbeatRequest& req, Duration timeout) {
  send(req, kHeartbeatVersion);
  return receive<HeartbeatResponse>(kHeartbeatVersion, timeout).body.error_code;
}

Errc Client::leave_group(const LeaveGroupRequest& req, Duration timeout) {
  send(req, kLeaveGroupVersion);
  return receive<LeaveGroupResponse>(kLeaveGroupVersion, timeout).body.error_code;
}

OffsetCommitResponse Client::commit_offsets(const OffsetCommitRequest& req, Duration timeout) {
  send(req, kOffsetCommitVersion);
  return receive<OffsetCommitResponse>(kOffsetCommitVersion, timeout).body;
}

OffsetFetchResponse Client::fetch_offsets(const OffsetFetchRequest& req, Duration timeout) {
  send(req, kOffsetFetchVersion);
  return receive<OffsetFetchResponse>(kOffsetFetchVersion, timeout).body;
}

ListGroupsResponse Client::list_groups(Duration timeout) {
  send(ListGroupsRequest{}, kListGroupsVersion);
  return receive<ListGroupsResponse>(kListGroupsVersion, timeout).body;
}

DescribeGroupsResponse Client::describe_groups(const DescribeGroupsRequest& req, Duration timeout) {
  send(req, kDescribeGroupsVersion);
  return receive<DescribeGroupsResponse>(kDescribeGroupsVersion, timeout).body;
}

ProducePartitionResponse Client::produce_one(const std::string& topic, std::int32_t partition,
                                             std::span<const ProducerRecord> records,
                                             std::int16_t acks, std::int32_t timeout_ms,
                                             const BatchProducer& producer) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  ProduceRequest req;
  req.acks = acks;
  req.timeout_ms = timeout_ms;
  req.topics = {{topic, {{partition, build_record_batch(records, now.count(), 0, producer)}}}};
  const ProduceResponse resp =
      produce(req, std::chrono::milliseconds(timeout_ms) + kDefaultTimeout);
  if (resp.responses.size() != 1 || resp.responses[0].partitions.size() != 1) {
    throw ClientError("produce: the response does not answer exactly one partition");
  }
  return resp.responses[0].partitions[0];
}

FetchPartitionResponse Client::fetch_one(const std::string& topic, std::int32_t partition,
                                         std::int64_t offset, std::int32_t max_wait_ms,
                                         std::int32_t min_bytes, std::int32_t max_bytes) {
  FetchRequest req;
  req.max_wait_ms = max_wait_ms;
  req.min_bytes = min_bytes;
  req.max_bytes = max_bytes;
  req.topics = {{topic, {{partition, offset, max_bytes}}}};
  const FetchResponse resp = fetch(req, std::chrono::milliseconds(max_wait_ms) + kDefaultTimeout);
  if (resp.responses.size() != 1 || resp.responses[0].partitions.size() != 1) {
    throw ClientError("fetch: the response does not answer exactly one partition");
  }
  return resp.responses[0].partitions[0];
}

}  // namespace purgatory::broker
