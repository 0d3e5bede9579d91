#include "util/deadline.h"

#include <chrono>
#include <limits>

#include "gtest/gtest.h"

namespace memonger::util {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

TEST(DeadlineTest, SharesAreMeasuredFromTheOwnersStart) {
  const Clock::time_point start = Clock::now();
  const Deadline limit(start, 10);
  EXPECT_EQ(limit.end(), start + seconds(10));
  EXPECT_EQ(limit.EndOfShare(0.5), start + seconds(5));
  EXPECT_EQ(limit.EndOfShare(1.1), start + seconds(11));
  const Deadline half = limit.Share(0.5);
  EXPECT_EQ(half.start(), start);
  EXPECT_DOUBLE_EQ(half.limit_seconds(), 5);
}

TEST(DeadlineTest, TimeLeftNeverGoesBelowZero) {
  const Clock::time_point start = Clock::now();
  const Deadline limit(start, 2);
  EXPECT_DOUBLE_EQ(limit.SecondsSpent(start + seconds(3)), 3);
  EXPECT_DOUBLE_EQ(limit.SecondsLeft(start + seconds(3)), 0);
  EXPECT_DOUBLE_EQ(limit.SecondsLeft(start + std::chrono::milliseconds(500)), 1.5);
}

// A limit of infinity, or beyond the clock's range, ends 10^9 s on: never in the past.
TEST(DeadlineTest, HugeLimitsEndInTheFuture) {
  const Clock::time_point start = Clock::now();
  for (double limit : {1e10, std::numeric_limits<double>::infinity()}) {
    EXPECT_GT(Deadline(start, limit).end(), start + seconds(1000000));
  }
}

TEST(DeadlineTest, ShareOfTimeLeftIsNoneOncePassed) {
  const Clock::time_point now = Clock::now();
  EXPECT_EQ(ShareOfTimeLeft(now, now - seconds(1), 0.5), Clock::duration::zero());
  EXPECT_EQ(ShareOfTimeLeft(now, now + seconds(4), 0.5), seconds(2));
}

}  // namespace
}  // namespace memonger::util
