#include "timer_task_list.hpp"

#include <vector>

#include <doctest/doctest.h>

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
