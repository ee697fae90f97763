// operation_lock.hpp: every promise of OperationLock.
#include "purgatory/detail/operation_lock.hpp"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory_contract_support.hpp"
#include "threads.hpp"

namespace purgatory::test {
namespace {

TEST_CASE(
    "operation_lock.hpp: Lockable and re-entrant: the owner may lock again and must unlock as "
    "often, depth() counts, other threads are kept out until the last unlock()") {
  purgatory::detail::OperationLock lock;
  lock.lock();
  lock.lock();
  CHECK(lock.try_lock());
  CHECK(lock.depth() == 3);
  auto other_gets_it = [&] {
    bool got = false;
    on_another_thread([&] {
      got = lock.try_lock();
      if (got) lock.unlock();
    });
    return got;
  };
  lock.unlock();
  lock.unlock();
  CHECK(lock.depth() == 1);
  CHECK_FALSE(other_gets_it());
  lock.unlock();
  CHECK(other_gets_it());
  {
    const std::scoped_lock guard(lock);  // usable with the standard lock guards
    CHECK(lock.held_by_current_thread());
  }
  CHECK_FALSE(lock.held_by_current_thread());
}

TEST_CASE(
    "operation_lock.hpp: held_by_current_thread() is exact for the calling thread: true for the "
    "owner, false for every other thread, and false once released") {
  purgatory::detail::OperationLock lock;
  CHECK_FALSE(lock.held_by_current_thread());
  lock.lock();
  CHECK(lock.held_by_current_thread());
  std::atomic<bool> other_sees{true};
  on_another_thread([&] { other_sees = lock.held_by_current_thread(); });
  CHECK_FALSE(other_sees.load());
  lock.unlock();
  CHECK_FALSE(lock.held_by_current_thread());
}

TEST_CASE(
    "operation_lock.hpp: thread-safe: 4 threads, each locking re-entrantly, exclude each other "
    "(a plain counter under the lock stays exact)") {
  purgatory::detail::OperationLock lock;
  long counter = 0;  // guarded by lock
  std::atomic<bool> wrong_owner{false};
  const int per_thread = contract::rounds(20000, 4000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        if (i % 3 == 0) {
          while (!lock.try_lock())
            std::this_thread::yield();
        } else {
          lock.lock();
        }
        lock.lock();
        if (!lock.held_by_current_thread() || lock.depth() != 2) wrong_owner = true;
        ++counter;
        lock.unlock();
        lock.unlock();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(counter == 4L * per_thread);
  CHECK_FALSE(wrong_owner.load());
}

}  // namespace
}  // namespace purgatory::test
