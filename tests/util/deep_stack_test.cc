#include "util/deep_stack.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace memonger::util {
namespace {

// 4 KiB of stack per level, touched so that it is really used.
int Recurse(int depth) {
  volatile char frame[4096];
  std::memset(const_cast<char*>(frame), depth & 0x7f, sizeof(frame));
  if (depth == 0) return frame[0];
  return Recurse(depth - 1) + frame[sizeof(frame) - 1];
}

// 24 MiB of recursion: three times a default 8 MiB thread stack, so a thread that did not get
// the stack it asked for crashes here.
constexpr int kDeep = 6000;
constexpr size_t kStack = size_t{64} << 20;

TEST(DeepStackTest, RunWithStackGivesTheStack) {
  int result = -1;
  ASSERT_TRUE(RunWithStack(kStack, [&] { result = Recurse(kDeep); }).ok());
  EXPECT_GE(result, 0);
}

TEST(DeepStackTest, RunOnThreadsCallsEveryWorkerOnceWithTheStack) {
  for (int threads : {1, 2, 5}) {
    std::vector<std::atomic<int>> calls(threads);
    std::atomic<int> deep{0};
    // Worker 0 is the calling thread: give it the stack too.
    ASSERT_TRUE(RunWithStack(kStack, [&] {
                  RunOnThreads(threads, kStack, [&](int worker) {
                    calls[worker].fetch_add(1);
                    if (Recurse(kDeep) >= 0) deep.fetch_add(1);
                  });
                }).ok());
    for (int w = 0; w < threads; ++w) EXPECT_EQ(calls[w].load(), 1) << "worker " << w;
    EXPECT_EQ(deep.load(), threads);
  }
}

}  // namespace
}  // namespace memonger::util
