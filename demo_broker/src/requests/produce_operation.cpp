#include "produce_operation.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include <fmt/format.h>

namespace purgatory::broker {

DelayedProduce::DelayedProduce(Nanos timeout, const LogStore& log, ProduceResponse response,
                               std::vector<Appended> appended, ResponseSlot slot,
                               OutcomeLog* outcomes)
    : DelayedOperation(timeout),
      log_(log),
      response_(std::move(response)),
      appended_(std::move(appended)),
      slot_(std::move(slot)),
      outcomes_(outcomes) {}

std::vector<TopicPartition> DelayedProduce::keys() const {
  std::vector<TopicPartition> out;
  out.reserve(appended_.size());
  for (const Appended& a : appended_) {
    if (std::find(out.begin(), out.end(), a.tp) == out.end()) out.push_back(a.tp);
  }
  return out;
}

bool DelayedProduce::replicated(const Appended& a) const {
  const PartitionLog* pl = log_.find(a.tp);
  return pl != nullptr && pl->high_watermark() >= a.required_offset;
}

bool DelayedProduce::try_complete() {
  const bool all = std::all_of(appended_.begin(), appended_.end(),
                               [this](const Appended& a) { return replicated(a); });
  return all && force_complete();
}

void DelayedProduce::on_complete() {
  std::size_t timed_out = 0;
  for (const Appended& a : appended_) {
    if (replicated(a)) continue;
    response_.responses[a.topic_index].partitions[a.partition_index].error_code =
        Errc::request_timed_out;
    ++timed_out;
  }
  std::string how;
  if (outcome() == Outcome::shut_down) {
    how = "cancelled (broker shutting down)";
  } else if (timed_out > 0) {
    how = fmt::format(
        "timed out: {} of {} partition(s) not replicated by every follower "
        "(REQUEST_TIMED_OUT, the data stays in the log)",
        timed_out, appended_.size());
  } else {
    how = parked_ ? "completed: every follower caught up" : "answered at once";
  }
  if (parked_ && outcomes_ != nullptr) {
    OutcomeEvent e;
    e.at = std::chrono::steady_clock::now();
    e.purgatory = "produce";
    e.key = appended_.empty()
                ? std::string()
                : fmt::format("{}-{}", appended_[0].tp.topic, appended_[0].tp.partition);
    if (appended_.size() > 1) e.key += fmt::format(" +{}", appended_.size() - 1);
    e.waited_ms = std::chrono::duration<double, std::milli>(e.at - arrived_).count();
    if (outcome() == Outcome::shut_down) {
      e.outcome = "shut down";
      e.why = "the broker is stopping";
    } else if (!slot_.conn->is_open()) {
      e.outcome = "abandoned";
      e.why = "the client disconnected";
    } else if (timed_out > 0) {
      e.outcome = "expired";
      e.why = fmt::format("{} of {} partition(s) not replicated by every follower in time",
                          timed_out, appended_.size());
    } else {
      e.outcome = "completed";
      e.why = "every follower caught up";
    }
    outcomes_->add(std::move(e));
  }
  if (!slot_.conn->is_open()) {
    slot_.conn->respond_nothing(slot_, "abandoned: the client disconnected");
    return;
  }
  slot_.conn->respond(slot_, encode_response(response_, slot_.version, slot_.correlation_id), how);
}

}  // namespace purgatory::broker
