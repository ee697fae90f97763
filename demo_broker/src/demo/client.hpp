// Client: a small blocking Kafka client on the demo broker's codec, for the demo and the tests.
//
// One TCP connection. Requests may be pipelined: send() returns at once, receive() reads the
// responses back in order (so a test can park a Fetch, send more, and watch the order). Every
// blocking call has a deadline: the client runs its own io_context for at most that long, then
// closes the socket and throws ClientError, so a broker that never answers cannot hang a test.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "protocol/codec.hpp"
#include "protocol/records.hpp"

namespace purgatory::broker {

// Timeouts, connection failures, a closed connection, and responses that do not match.
class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Milliseconds from t to now on the steady clock: how long a request waited, in the demo's reports.
inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Thread-compatible: one thread at a time.
class Client {
 public:
  using Duration = std::chrono::steady_clock::duration;
  static constexpr Duration kDefaultTimeout = std::chrono::seconds(30);

  explicit Client(std::string client_id = "purgatory-demo-client");
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void connect(const std::string& host, std::uint16_t port, Duration timeout = kDefaultTimeout);
  void close() noexcept;
  [[nodiscard]] bool is_open() const noexcept { return socket_.is_open(); }

  // ---- pipelining ------------------------------------------------------------------------
  // Encodes and writes one request; returns its correlation id. A response is expected unless
  // `expect_response` is false (Produce with acks=0).
  template <class Req>
  std::int32_t send(const Req& req, std::int16_t version, bool expect_response = true) {
    const std::int32_t id = next_correlation_id_++;
    write(encode_request(req, version, id, client_id_));
    if (expect_response) expected_.push_back(id);
    return id;
  }
  // Reads the next response, which must answer the oldest request sent and not yet received.
  template <class Body>
  Response<Body> receive(std::int16_t version, Duration timeout = kDefaultTimeout) {
    const Bytes payload = receive_frame(timeout);
    Response<Body> resp = decode_response<Body>(payload, version);
    check_correlation(resp.correlation_id);
    return resp;
  }

  // ---- raw bytes (malformed-input tests) -------------------------------------------------
  void write(ByteView bytes, Duration timeout = kDefaultTimeout);
  // The payload of the next frame.
  Bytes receive_frame(Duration timeout = kDefaultTimeout);
  // True when the peer closes the connection within `timeout` (anything it sends is discarded).
  bool closed_by_peer_within(Duration timeout);

  // ---- one request, one response ----------------------------------------------------------
  ApiVersionsResponse api_versions(std::int16_t version = 2, Duration timeout = kDefaultTimeout);
  MetadataResponse metadata(std::optional<std::vector<std::string>> topics,
                            Duration timeout = kDefaultTimeout);
  ProduceResponse produce(const ProduceRequest& req, Duration timeout = kDefaultTimeout);
  FetchResponse fetch(const FetchRequest& req, Duration timeout = kDefaultTimeout);
  ListOffsetsResponse list_offsets(const ListOffsetsRequest& req,
                                   Duration timeout = kDefaultTimeout);
  // An idempotent producer's id and epoch (no transactional id).
  InitProducerIdResponse init_producer_id(Duration timeout = kDefaultTimeout);

  // One partition's shorthand: produce `records` as one batch, stamped with `producer` (default:
  // none, not idempotent); returns that partition's answer.
  ProducePartitionResponse produce_one(const std::string& topic, std::int32_t partition,
                                       std::span<const ProducerRecord> records,
                                       std::int16_t acks = 1, std::int32_t timeout_ms = 30000,
                                       const BatchProducer& producer = {});
  // One partition's fetch; `wait` is how long to wait for the response (past max_wait_ms).
  FetchPartitionResponse fetch_one(const std::string& topic, std::int32_t partition,
                                   std::int64_t offset, std::int32_t max_wait_ms,
                                   std::int32_t min_bytes, std::int32_t max_bytes = 1 << 20);

  // ---- consumer groups, at the versions librdkafka 2.0 uses ------------------------------------
  // A JoinGroup is answered when the group's join phase ends: to join several members at once,
  // send() each JoinGroupRequest (kJoinGroupVersion) and receive() the answers afterwards.
  FindCoordinatorResponse find_coordinator(const std::string& group_id,
                                           Duration timeout = kDefaultTimeout);
  JoinGroupResponse join_group(const JoinGroupRequest& req, Duration timeout = kDefaultTimeout);
  SyncGroupResponse sync_group(const SyncGroupRequest& req, Duration timeout = kDefaultTimeout);
  Errc heartbeat(const HeartbeatRequest& req, Duration timeout = kDefaultTimeout);
  Errc leave_group(const LeaveGroupRequest& req, Duration timeout = kDefaultTimeout);
  OffsetCommitResponse commit_offsets(const OffsetCommitRequest& req,
                                      Duration timeout = kDefaultTimeout);
  OffsetFetchResponse fetch_offsets(const OffsetFetchRequest& req,
                                    Duration timeout = kDefaultTimeout);
  ListGroupsResponse list_groups(Duration timeout = kDefaultTimeout);
  DescribeGroupsResponse describe_groups(const DescribeGroupsRequest& req,
                                         Duration timeout = kDefaultTimeout);

 private:
  // Runs the io_context until `done` or the deadline; on timeout closes the socket and throws.
  void run_until(const bool& done, Duration timeout, const char* what);
  void check_correlation(std::int32_t id);

  std::string client_id_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  std::int32_t next_correlation_id_ = 1;
  std::deque<std::int32_t> expected_;
};

// Protocol versions this client speaks (the broker's advertised ones).
inline constexpr std::int16_t kProduceVersion = 3;
inline constexpr std::int16_t kFetchVersion = 4;
inline constexpr std::int16_t kListOffsetsVersion = 1;
inline constexpr std::int16_t kMetadataVersion = 8;
inline constexpr std::int16_t kInitProducerIdVersion = 5;
inline constexpr std::int16_t kFindCoordinatorVersion = 2;
inline constexpr std::int16_t kJoinGroupVersion = 4;  // a new member gets MEMBER_ID_REQUIRED first
inline constexpr std::int16_t kSyncGroupVersion = 2;
inline constexpr std::int16_t kHeartbeatVersion = 2;
inline constexpr std::int16_t kLeaveGroupVersion = 1;
inline constexpr std::int16_t kOffsetCommitVersion = 6;
inline constexpr std::int16_t kOffsetFetchVersion = 5;
inline constexpr std::int16_t kListGroupsVersion = 2;
inline constexpr std::int16_t kDescribeGroupsVersion = 2;

}  // namespace purgatory::broker
