#include "util/ordered_race.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "util/splitmix64.h"

namespace memonger::util {
namespace {

constexpr size_t kStack = 1 << 20;

// What the serial loop returns: the first task that does not answer kUndecided.
int SerialAnswer(const std::vector<TaskEnd>& ends) {
  for (size_t k = 0; k < ends.size(); ++k) {
    if (ends[k] != TaskEnd::kUndecided) return static_cast<int>(k);
  }
  return static_cast<int>(ends.size());
}

TEST(OrderedRaceTest, ReturnsTheSerialAnswerForEveryThreadCount) {
  SplitMix64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int count = static_cast<int>(rng.Below(12));
    std::vector<TaskEnd> ends(count);
    for (TaskEnd& end : ends) {
      const uint64_t r = rng.Below(10);
      end = r < 7 ? TaskEnd::kUndecided : r < 9 ? TaskEnd::kDecisive : TaskEnd::kNoMore;
    }
    // Tasks of uneven length, so that later ones often end first.
    std::vector<int> micros(count);
    for (int& m : micros) m = static_cast<int>(rng.Below(300));
    for (int threads : {1, 2, 3, 8}) {
      std::vector<std::atomic<int>> runs(count);
      const int first = RaceInOrder(threads, kStack, count, [&](int k, const RaceStop&) {
        runs[k].fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(micros[k]));
        return ends[k];
      });
      ASSERT_EQ(first, SerialAnswer(ends)) << "trial " << trial << ", " << threads << " threads";
      for (int k = 0; k <= first && k < count; ++k) {
        EXPECT_EQ(runs[k].load(), 1) << "task " << k << " below the end must run once";
      }
      for (int k = 0; k < count; ++k) EXPECT_LE(runs[k].load(), 1);
      if (threads == 1) {
        for (int k = first + 1; k < count; ++k) EXPECT_EQ(runs[k].load(), 0);
      }
    }
  }
}

TEST(OrderedRaceTest, AbandonsTasksAboveAnEndAndNeverTheOnesBelow) {
  // Three tasks on three threads, all running at once: task 1 ends the race once task 2 has
  // started; task 2 spins until it is told to stop; task 0 goes on after task 1 has ended and
  // must never be told to stop. The answer is task 1's.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto wait_for = [&](const std::atomic<bool>& flag) {
    while (!flag.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  };
  std::atomic<bool> one_done{false};
  std::atomic<bool> two_started{false};
  std::atomic<bool> zero_stopped{false};
  std::atomic<bool> two_stopped{false};
  const int first = RaceInOrder(3, kStack, 3, [&](int k, const RaceStop& stop) {
    if (k == 0) {
      wait_for(one_done);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      zero_stopped = stop();
      return TaskEnd::kUndecided;
    }
    if (k == 1) {
      wait_for(two_started);
      one_done = true;
      return TaskEnd::kDecisive;
    }
    two_started = true;
    while (!stop() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    two_stopped = stop();
    return TaskEnd::kDecisive;
  });
  EXPECT_EQ(first, 1);
  EXPECT_TRUE(two_started.load());
  EXPECT_FALSE(zero_stopped.load());
  EXPECT_TRUE(two_stopped.load());
}

TEST(OrderedRaceTest, NoTasksAndOneTask) {
  int calls = 0;
  EXPECT_EQ(RaceInOrder(4, kStack, 0, [&](int, const RaceStop&) {
              ++calls;
              return TaskEnd::kDecisive;
            }),
            0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(RaceInOrder(4, kStack, 1, [&](int, const RaceStop&) {
              ++calls;
              return TaskEnd::kUndecided;
            }),
            1);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace memonger::util
