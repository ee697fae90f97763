#include "delayed_join.hpp"

#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "group/group_coordinator.hpp"

namespace purgatory::broker {

DelayedJoin::DelayedJoin(GroupCoordinator& coordinator, std::shared_ptr<GroupMetadata> group,
                         std::int32_t rebalance_timeout_ms)
    : DelayedOperation(std::chrono::milliseconds(rebalance_timeout_ms)),
      coordinator_(coordinator),
      group_(std::move(group)),
      rebalance_timeout_ms_(rebalance_timeout_ms) {}

bool DelayedJoin::try_complete() {
  return coordinator_.can_complete_join(*group_) && force_complete();
}

void DelayedJoin::on_complete() {
  switch (outcome()) {
    case Outcome::completed:
      coordinator_.on_complete_join(group_, GroupCoordinator::JoinEnd::all_rejoined,
                                    "join phase completed: every member rejoined");
      break;
    case Outcome::expired:
      coordinator_.on_complete_join(
          group_, GroupCoordinator::JoinEnd::rebalance_timeout,
          fmt::format("join phase expired after the rebalance timeout ({} ms)",
                      rebalance_timeout_ms_));
      break;
    default:
      break;  // shut down
  }
}

InitialDelayedJoin::InitialDelayedJoin(GroupCoordinator& coordinator,
                                       std::shared_ptr<GroupMetadata> group, std::int32_t delay_ms,
                                       std::int32_t remaining_ms)
    : DelayedOperation(std::chrono::milliseconds(delay_ms)),
      coordinator_(coordinator),
      group_(std::move(group)),
      delay_ms_(delay_ms),
      remaining_ms_(remaining_ms) {}

void InitialDelayedJoin::on_complete() {
  if (outcome() != Outcome::expired) return;  // shut down: it never completes otherwise
  if (coordinator_.maybe_extend_initial_delay(group_, remaining_ms_, delay_ms_)) return;
  coordinator_.on_complete_join(
      group_, GroupCoordinator::JoinEnd::initial_delay,
      fmt::format("join phase ended after the initial rebalance delay ({} ms)", delay_ms_));
}

}  // namespace purgatory::broker
