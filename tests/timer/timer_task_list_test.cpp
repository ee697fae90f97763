// Tests of a wheel slot's list (timer/src/timer_task_list.hpp, internal to the library): one
// test per promise (docs/contracts.md).
#include <cstddef>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <doctest/doctest.h>

#include "timer_contract_support.hpp"
#include "timer_task_list.hpp"

using purgatory::TaskRef;
using purgatory::TimerTask;
using purgatory::detail::TimerTaskList;
using purgatory::test::make_counting_tasks;

namespace {

std::multiset<const TimerTask*> contents(const TimerTaskList& list) {
  std::multiset<const TimerTask*> seen;
  list.for_each([&](const TimerTask& t) { seen.insert(&t); });
  return seen;
}

}  // namespace

TEST_CASE(
    "timer_task_list.hpp: add() of a task sitting in another list moves it: it is in one list "
    "only, and both sizes follow") {
  auto tasks = make_counting_tasks(3);
  TimerTaskList a;
  TimerTaskList b;
  for (auto& t : tasks)
    a.add(*t);
  b.add(*tasks[1]);
  CHECK(a.size() == 2);
  CHECK(b.size() == 1);
  CHECK(contents(a) == std::multiset<const TimerTask*>{tasks[0].get(), tasks[2].get()});
  CHECK(contents(b) == std::multiset<const TimerTask*>{tasks[1].get()});
  a.flush([](TimerTask&) {});
  b.flush([](TimerTask&) {});
}

TEST_CASE("timer_task_list.hpp: add() of a task already in this list keeps one entry") {
  auto tasks = make_counting_tasks(2);
  TimerTaskList a;
  a.add(*tasks[0]);
  a.add(*tasks[1]);
  a.add(*tasks[0]);
  a.add(*tasks[0]);
  CHECK(a.size() == 2);
  CHECK(contents(a) == std::multiset<const TimerTask*>{tasks[0].get(), tasks[1].get()});
  a.flush([](TimerTask&) {});
}

TEST_CASE(
    "timer_task_list.hpp: lists sharing a counter keep it equal to the sum of their sizes "
    "through 5000 random adds, moves, removes and pops") {
  std::size_t counter = 0;
  TimerTaskList lists[3] = {TimerTaskList(&counter), TimerTaskList(&counter),
                            TimerTaskList(&counter)};
  auto tasks = make_counting_tasks(40);
  std::map<const TimerTask*, int> where;  // the model: task -> list index
  std::mt19937_64 rng(11);
  for (int step = 0; step < 5000; ++step) {
    TimerTask& t = *tasks[rng() % tasks.size()];
    const int l = static_cast<int>(rng() % 3);
    switch (rng() % 3) {
      case 0:
        lists[l].add(t);
        where[&t] = l;
        break;
      case 1:
        if (auto it = where.find(&t); it != where.end()) {
          lists[it->second].remove(t);
          where.erase(it);
        }
        break;
      default:
        if (TimerTask* popped = lists[l].pop()) {
          REQUIRE(where.at(popped) == l);
          where.erase(popped);
        } else {
          REQUIRE(lists[l].empty());
        }
    }
    REQUIRE(counter == lists[0].size() + lists[1].size() + lists[2].size());
    REQUIRE(counter == where.size());
    for (int i = 0; i < 3; ++i) {  // each list holds exactly the model's tasks
      std::multiset<const TimerTask*> expected;
      for (const auto& [task, at] : where) {
        if (at == i) expected.insert(task);
      }
      REQUIRE(contents(lists[i]) == expected);
    }
  }
  for (auto& l : lists)
    l.flush([](TimerTask&) {});
  CHECK(counter == 0);
}

TEST_CASE(
    "timer_task_list.hpp: remove() unlinks the task, pop() returns each remaining task once, then "
    "null") {
  auto tasks = make_counting_tasks(20);
  TimerTaskList list;
  for (auto& t : tasks)
    list.add(*t);
  list.remove(*tasks[5]);
  list.remove(*tasks[13]);
  CHECK(list.size() == 18);
  std::multiset<const TimerTask*> popped;
  while (TimerTask* t = list.pop())
    popped.insert(t);
  CHECK(popped.size() == 18);
  CHECK(std::set<const TimerTask*>(popped.begin(), popped.end()).size() == 18);
  CHECK(popped.count(tasks[5].get()) == 0);
  CHECK(popped.count(tasks[13].get()) == 0);
  CHECK(list.empty());
  CHECK(list.pop() == nullptr);
}

// pop() leaves the back link of each stripe's new front stale (timer_task_list.hpp): a remove()
// of such a front must not write into the popped task, now in another list.
TEST_CASE(
    "timer_task_list.hpp: remove() of the tasks a pop() left at the front of their stripes keeps "
    "both lists intact") {
  constexpr std::size_t kPerStripe = 3;
  constexpr std::size_t kTasks = TimerTaskList::kStripes * kPerStripe;
  auto tasks = make_counting_tasks(kTasks);
  TimerTaskList from;
  TimerTaskList to;
  for (auto& t : tasks)
    from.add(*t);
  std::multiset<const TimerTask*> moved;
  for (std::size_t i = 0; i < TimerTaskList::kStripes; ++i) {  // one from each stripe
    TimerTask* t = from.pop();
    REQUIRE(t != nullptr);
    moved.insert(t);
    to.add(*t);
  }
  // Remove every task left, the fronts the pops left first among them, in each order.
  std::multiset<const TimerTask*> left = contents(from);
  REQUIRE(left.size() == kTasks - TimerTaskList::kStripes);
  for (auto& t : tasks) {
    if (left.count(t.get()) == 0) continue;
    from.remove(*t);
    left.erase(t.get());
    REQUIRE(contents(from) == left);
    REQUIRE(contents(to) == moved);
  }
  CHECK(from.empty());
  CHECK(from.pop() == nullptr);
  std::size_t popped = 0;
  while (to.pop() != nullptr)
    ++popped;
  CHECK(popped == TimerTaskList::kStripes);
}

TEST_CASE(
    "timer_task_list.hpp: flush() unlinks each task before calling fn, which may add it to "
    "another list, the bucket's expiration is reset") {
  auto tasks = make_counting_tasks(10);
  TimerTaskList from;
  TimerTaskList to;
  for (auto& t : tasks)
    from.add(*t);
  from.set_expiration(120);
  std::size_t calls = 0;
  bool always_unlinked = true;
  from.flush([&](TimerTask& t) {
    ++calls;
    // Unlinked already: from's size no longer counts it.
    always_unlinked = always_unlinked && from.size() == tasks.size() - calls;
    to.add(t);
  });
  CHECK(calls == 10);
  CHECK(always_unlinked);
  CHECK(from.empty());
  CHECK(to.size() == 10);
  CHECK(from.expiration() == TimerTaskList::kNoExpiration);
  to.flush([](TimerTask&) {});
}

TEST_CASE(
    "timer_task_list.hpp: for_each() and for_each_mutable() visit every task once and unlink "
    "none") {
  auto tasks = make_counting_tasks(25);
  TimerTaskList list;
  for (auto& t : tasks)
    list.add(*t);
  std::multiset<const TimerTask*> seen = contents(list);
  std::multiset<const TimerTask*> seen_mutable;
  list.for_each_mutable([&](TimerTask& t) { seen_mutable.insert(&t); });
  std::multiset<const TimerTask*> all;
  for (auto& t : tasks)
    all.insert(t.get());
  CHECK(seen == all);
  CHECK(seen_mutable == all);
  CHECK(list.size() == 25);
  list.flush([](TimerTask&) {});
}

TEST_CASE(
    "timer_task_list.hpp: expiration() is kNoExpiration when unused, set_expiration() returns "
    "whether the value changed") {
  TimerTaskList list;
  CHECK(list.expiration() == TimerTaskList::kNoExpiration);
  CHECK(list.set_expiration(40));
  CHECK(list.expiration() == 40);
  CHECK_FALSE(list.set_expiration(40));
  CHECK(list.set_expiration(60));
  CHECK(list.expiration() == 60);
}

namespace {

struct NoopTask : purgatory::TimerTask {
  void run() override {}
};

}  // namespace

// Kafka's TimerTaskListTest: re-adding a task to another list moves it, and the shared counter
// counts each task once.
TEST_CASE("TimerTaskList: add, re-add and remove move 10 tasks between 3 lists and count them") {
  std::size_t shared = 0;
  purgatory::detail::TimerTaskList list1(&shared), list2(&shared), list3(&shared);
  std::vector<purgatory::Ref<NoopTask>> tasks;
  for (int i = 1; i <= 10; ++i) {
    tasks.push_back(purgatory::make_task<NoopTask>());
    list1.add(*tasks.back());
    CHECK(shared == static_cast<std::size_t>(i));
  }
  CHECK(list1.size() == 10);

  for (int i = 0; i < 4; ++i) {  // moving keeps the count
    list2.add(*tasks[static_cast<std::size_t>(i)]);
    CHECK(shared == 10);
  }
  CHECK(list1.size() == 6);
  CHECK(list2.size() == 4);

  for (std::size_t i = 4; i < 10; ++i)
    list3.add(*tasks[i]);
  CHECK(list1.size() == 0);
  CHECK(list2.size() == 4);
  CHECK(list3.size() == 6);
  CHECK(shared == 10);

  for (std::size_t i = 0; i < 4; ++i)
    list2.remove(*tasks[i]);
  CHECK(list2.size() == 0);
  CHECK(list3.size() == 6);
  CHECK(shared == 6);

  int flushed = 0;
  list3.flush([&](purgatory::TimerTask&) { ++flushed; });
  CHECK(flushed == 6);
  CHECK(list3.empty());
  CHECK(shared == 0);
}

TEST_CASE("TimerTaskList: re-adding a task to its own list keeps one entry") {
  std::size_t shared = 0;
  purgatory::detail::TimerTaskList list(&shared);
  auto task = purgatory::make_task<NoopTask>();
  list.add(*task);
  list.add(*task);
  CHECK(list.size() == 1);
  CHECK(shared == 1);
  list.remove(*task);
  CHECK(shared == 0);
}
