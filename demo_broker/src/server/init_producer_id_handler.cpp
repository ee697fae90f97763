// InitProducerId: a new producer id, epoch 0, for each idempotent producer that asks, as Kafka's
// broker does for a null transactional id (even one that names its current id and epoch, v3+:
// its state on each partition stays, and the new id starts its sequences at 0). Transactions are
// not spoken: a transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which
// every client treats as fatal, so a transactional producer stops at once with that error instead
// of retrying; and the broker says why in its log.
#include <fmt/format.h>

#include "purgatory/broker/broker.hpp"
#include "requests/responder.hpp"

namespace purgatory::broker {

void Broker::handle_init_producer_id(const ResponseSlot& slot, const RequestHeader& header,
                                     const InitProducerIdRequest& req) {
  InitProducerIdResponse resp;
  std::string outcome;
  const std::string client = header.client_id.value_or("");
  if (req.transactional_id) {
    // Kafka answers an empty transactional id INVALID_REQUEST; any other one it would look up in
    // its transaction coordinator, which this broker does not have.
    resp.error_code = req.transactional_id->empty() ? Errc::invalid_request
                                                    : Errc::transactional_id_authorization_failed;
    transactional_refused_.fetch_add(1, std::memory_order_relaxed);
    outcome = fmt::format(
        "{}: transactional id '{}' refused, demo_broker does not speak transactions (an "
        "idempotent producer, without a transactional id, is served)",
        errc_name(resp.error_code), *req.transactional_id);
    log(fmt::format("conn {} {} [{}]: InitProducerId {}", slot.conn->id(), slot.conn->peer(),
                    client, outcome));
  } else {
    resp.producer_id = next_producer_id_++;
    resp.producer_epoch = 0;
    producer_ids_issued_.fetch_add(1, std::memory_order_relaxed);
    outcome = fmt::format("producer id {} epoch 0", resp.producer_id);
    if (req.producer_id >= 0) {
      outcome +=
          fmt::format(" (replaces producer id {} epoch {})", req.producer_id, req.producer_epoch);
    }
    event(fmt::format("issued {} to {} [{}]", outcome, slot.conn->peer(), client));
  }
  slot.conn->respond(slot, encode_response(resp, slot.version, slot.correlation_id), outcome);
}

}  // namespace purgatory::broker
