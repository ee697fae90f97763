// purgatory/delayed_operation_purgatory.hpp: a watch refused by a key copy throwing while a check
// runs, on the hooked libraries at their named race points.
#include "purgatory/delayed_operation_purgatory.hpp"
#include "purgatory/detail/operation_access.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "allocation_counter.hpp"
#include "contract_support.hpp"
#include "purgatory/timer/detail/task_pool.hpp"
#include "purgatory_contract_support.hpp"
#include "purgatory_test_support.hpp"
#include "race_schedule.hpp"
#include "threads.hpp"

using namespace std::chrono_literals;

namespace purgatory::test {
namespace {

TEST_CASE(
    "delayed_operation_purgatory.hpp: refused when copying a key throws after other keys were "
    "linked: nothing stays behind, checks meanwhile do not complete it, and a retry works") {
  ManualTimer manual;
  DelayedOperationPurgatory<FragileKey, FragileKeyHash> p(manual.timer);
  auto op = probe(1s);
  const std::array<FragileKey, 2> keys{FragileKey(1), FragileKey(2)};
  bool first = true;
  std::size_t checked = 99;
  RaceSchedule schedule(
      RaceSchedule::at_each("DelayedOperationPurgatory::watch: linked a key", [&] {
        if (!std::exchange(first, false)) return;
        op->completable = true;
        // A check of the linked key, from another thread.
        on_another_thread([&] { checked = p.check_and_complete(FragileKey(1)); });
        // Key 2 is new to the map: copying it in throws.
        FragileKey::fail_copies = true;
      }));
  watch_expecting_copy_failure(p, op, keys);
  CHECK(!first);  // the throw came after key 1 was linked
  CHECK(checked == 0);
  check_refused_left_nothing(p, manual.timer, op, 0);
  CHECK(op->tries == 1);  // the check's note died with the refused watch
  CHECK(p.check_and_complete(FragileKey(1)) == 0);
  // Completable now: the retry completes it.
  CHECK(p.try_complete_else_watch(op, std::span<const FragileKey>(keys)));
  CHECK(op->completions == 1);
}

}  // namespace
}  // namespace purgatory::test
