// ref.hpp: what a Ref promises its holder: shared ownership with the count in the object (copies
// count, moves do not, the last Ref deletes), conversions from derived to base, comparison,
// ordering and hashing by object, and distinct Refs to one object used on many threads.
#include "purgatory/timer/ref.hpp"

#include <atomic>
#include <compare>
#include <functional>
#include <set>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "purgatory/delayed_operation.hpp"
#include "purgatory/timer/timer_task.hpp"

namespace {

using purgatory::Ref;
using purgatory::TimerTask;

// Counts its destructions.
struct Counted : TimerTask {
  explicit Counted(std::atomic<int>& destroyed) : destroyed_(destroyed) {}
  ~Counted() override { destroyed_.fetch_add(1); }
  void run() override {}

 private:
  std::atomic<int>& destroyed_;
};

struct Derived final : Counted {
  using Counted::Counted;
};

static_assert(std::is_nothrow_copy_constructible_v<Ref<TimerTask>>);
static_assert(std::is_nothrow_move_constructible_v<Ref<TimerTask>>);
static_assert(std::is_convertible_v<Ref<Derived>, Ref<TimerTask>>);
static_assert(!std::is_convertible_v<Ref<TimerTask>, Ref<Derived>>);  // base to derived: never
static_assert(!std::is_convertible_v<Ref<purgatory::DelayedOperation>, Ref<TimerTask>>);
static_assert(!std::is_convertible_v<Ref<TimerTask>, bool>);  // explicit operator bool

}  // namespace

TEST_CASE(
    "ref.hpp: a copy adds a reference and a move takes one over (the source left empty), the last "
    "Ref deletes the object, reset() drops one") {
  std::atomic<int> destroyed{0};
  Ref<Counted> a = purgatory::make_task<Counted>(destroyed);
  CHECK(a->use_count() == 1);
  Ref<Counted> b = a;
  CHECK(a->use_count() == 2);
  CHECK(b == a);
  Ref<Counted> c = std::move(b);
  CHECK(b == nullptr);  // NOLINT(bugprone-use-after-move): the contract says empty
  CHECK_FALSE(b);
  CHECK(a->use_count() == 2);
  c.reset();
  CHECK_FALSE(c);
  CHECK(a->use_count() == 1);
  CHECK(destroyed == 0);
  Ref<Counted>& same = a;
  a = same;  // assigning a Ref its own object keeps the object
  CHECK(a->use_count() == 1);
  a.reset();
  CHECK(destroyed == 1);
}

TEST_CASE(
    "ref.hpp: assigning drops the reference held before, swap() exchanges objects, a Ref to a "
    "derived class converts to one to its base (copy or move) and compares equal to it") {
  std::atomic<int> destroyed{0};
  Ref<Counted> first = purgatory::make_task<Counted>(destroyed);
  Ref<Counted> second = purgatory::make_task<Counted>(destroyed);
  Counted* const second_object = second.get();
  first.swap(second);
  CHECK(first.get() == second_object);
  second = first;  // drops the other object: its only reference
  CHECK(destroyed == 1);
  CHECK(second == first);
  CHECK(first->use_count() == 2);

  Ref<Derived> derived = purgatory::make_task<Derived>(destroyed);
  Ref<TimerTask> as_base = derived;
  CHECK(as_base == derived);
  CHECK(derived->use_count() == 2);
  Ref<TimerTask> moved_as_base = std::move(derived);
  CHECK(derived == nullptr);  // NOLINT(bugprone-use-after-move)
  CHECK(moved_as_base == as_base);
  CHECK(as_base->use_count() == 2);
  as_base.reset();
  moved_as_base.reset();
  CHECK(destroyed == 2);
}

TEST_CASE(
    "ref.hpp: Refs order and hash by their object, so they work as keys of std::set and "
    "std::unordered_set, and an empty Ref equals nullptr") {
  std::atomic<int> destroyed{0};
  std::vector<Ref<Counted>> tasks;
  for (int i = 0; i < 5; ++i)
    tasks.push_back(purgatory::make_task<Counted>(destroyed));
  std::set<Ref<Counted>> ordered(tasks.begin(), tasks.end());
  std::unordered_set<Ref<Counted>> hashed(tasks.begin(), tasks.end());
  for (const auto& t : tasks) {
    ordered.insert(t);  // a second Ref to the same object is the same key
    hashed.insert(Ref<Counted>(t));
  }
  CHECK(ordered.size() == 5);
  CHECK(hashed.size() == 5);
  for (const auto& t : tasks) {
    CHECK(ordered.count(t) == 1);
    CHECK(hashed.count(t) == 1);
  }
  CHECK((tasks[0] <=> tasks[1]) == std::compare_three_way{}(tasks[0].get(), tasks[1].get()));
  CHECK(Ref<Counted>() == nullptr);
  CHECK(Ref<Counted>(nullptr) == Ref<Counted>());
  CHECK(tasks[0] != nullptr);
}

TEST_CASE(
    "ref.hpp: detach() empties the Ref and hands its reference to the caller, which a Ref made "
    "with add_ref false adopts: the count neither grows nor drops") {
  std::atomic<int> destroyed{0};
  Ref<Counted> held = purgatory::make_task<Counted>(destroyed);
  Counted* const raw = held.detach();
  CHECK_FALSE(held);
  CHECK(raw->use_count() == 1);
  Ref<Counted> adopted(raw, /*add_ref=*/false);
  CHECK(adopted->use_count() == 1);
  Ref<Counted> shared(raw);  // a new reference to an object shared already
  CHECK(raw->use_count() == 2);
  shared.reset();
  adopted.reset();
  CHECK(destroyed == 1);
}

TEST_CASE(
    "ref.hpp: distinct Refs to one object are used on many threads at once: 4 threads copy, move "
    "and drop 100,000 Refs each, the count comes back to 1 and the object is deleted once") {
  std::atomic<int> destroyed{0};
  Ref<Counted> shared = purgatory::make_task<Counted>(destroyed);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([own = shared] {  // each thread its own Ref
      for (int i = 0; i < 100'000; ++i) {
        Ref<Counted> copy = own;
        Ref<TimerTask> as_base = std::move(copy);
        as_base.reset();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(shared->use_count() == 1);
  CHECK(destroyed == 0);
  shared.reset();
  CHECK(destroyed == 1);
}
