// A downstream program: one timer task and one delayed operation, on a manual clock; and the
// library's version, which must be the headers'.
#include <purgatory/delayed_operation_purgatory.hpp>
#include <purgatory/timer/external_driver.hpp>
#include <purgatory/timer/system_timer.hpp>
#include <purgatory/version.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

int main() {
  using namespace std::chrono_literals;
  purgatory::ManualClock clock;
  auto timer = std::make_shared<purgatory::SystemTimer>(
      purgatory::TimerOptions{.clock = &clock,
                              .executor = std::make_shared<purgatory::InlineExecutor>(),
                              .driver = purgatory::TimerOptions::Driver::external});
  purgatory::ExternalDriver driver(*timer);

  int fired = 0;
  timer->add(purgatory::make_task([&] { ++fired; }), 5ms);

  purgatory::DelayedOperationPurgatory<std::string> purgatory(timer);
  bool ready = false;
  int completed = 0;
  auto op = purgatory::make_operation(
      1s, [&] { return ready; }, [&] { ++completed; });
  purgatory.try_complete_else_watch(op, {std::string("orders-0")});
  ready = true;
  const std::size_t done = purgatory.check_and_complete("orders-0");

  clock.advance(5ms);
  driver.advance_clock();
  const purgatory::Version v = purgatory::version();
  const bool ok = fired == 1 && completed == 1 && done == 1 && purgatory.num_delayed() == 0 &&
                  v == purgatory::kHeaderVersion;
  std::printf(
      "consumer of purgatory %d.%d.%d (headers %s): timer task fired %d, operation "
      "completed %d: %s\n",
      v.major, v.minor, v.patch, PURGATORY_VERSION_STRING, fired, completed, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
