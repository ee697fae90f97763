// RequestDispatcher: all a Connection knows of the server that accepted it. A frame goes in
// (dispatch()); the answers come back through the Connection's own Responder side, in the slot
// the dispatcher opens for the request; and the Connection tells of its end (a frame refused
// before it was read, the close). The Broker implements it; a Connection never sees the Broker.
#pragma once

#include <cstddef>

#include "protocol/wire.hpp"

namespace purgatory::broker {

class Connection;

// Called only from the broker's io thread, by the connections.
class RequestDispatcher {
 public:
  RequestDispatcher() = default;
  RequestDispatcher(const RequestDispatcher&) = delete;
  RequestDispatcher& operator=(const RequestDispatcher&) = delete;

  // Serves one complete request frame `conn` read (the payload after the size prefix): opens its
  // response slot on `conn` and answers it there, at once or later. A request that cannot be
  // decoded closes `conn`, with a log line. `frame` is valid during the call only.
  virtual void dispatch(Connection& conn, ByteView frame) = 0;
  // `conn` refused a frame by its size prefix (beyond the request limit, or too small), before
  // reading it; it closes next.
  virtual void on_malformed_frame(const Connection& conn) noexcept = 0;
  // `conn` closed (once), force-completing the `abandoned` operations still parked for it.
  virtual void on_connection_closed(const Connection& conn, std::size_t abandoned) = 0;

 protected:
  ~RequestDispatcher() = default;
};

}  // namespace purgatory::broker
