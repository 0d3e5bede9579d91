#include "memonger/sharing/free_group_index.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "util/splitmix64.h"

namespace memonger {
namespace {

// Groups of disjoint intervals over segments, built as first fit builds them, against a brute
// force: FirstFree gives the lowest group none of whose intervals meets the query (with the
// caller's test accepting exactly those), and never calls a group sure that has an interval
// meeting the query.
TEST(FreeGroupIndexTest, FirstFreeIsTheLowestFreeGroup) {
  for (const int segments : {1, 5, 64, 65, 200, 3000}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      SCOPED_TRACE(testing::Message() << "segments " << segments << " seed " << seed);
      util::SplitMix64 rng(seed * 131 + static_cast<uint64_t>(segments));
      FreeGroupIndex index(segments);
      std::vector<std::vector<std::pair<int, int>>> groups;  // [lo, hi) per group
      const auto meets = [&](int g, int lo, int hi) {
        for (const auto& [a, b] : groups[g]) {
          if (a < hi && lo < b) return true;
        }
        return false;
      };
      for (int step = 0; step < 1500; ++step) {
        const int lo = static_cast<int>(rng.Below(static_cast<uint64_t>(segments)));
        const uint64_t room = static_cast<uint64_t>(segments - lo);
        const uint64_t span = rng.Percent(20) ? room : std::min<uint64_t>(room, 70);
        const int length = 1 + static_cast<int>(rng.Below(span));
        const int hi = lo + length;
        int expected = -1;
        for (int g = 0; g < static_cast<int>(groups.size()) && expected < 0; ++g) {
          if (!meets(g, lo, hi)) expected = g;
        }
        int64_t work = 0;
        const int found = index.FirstFree(lo, hi, [&](int g, bool sure) {
          const bool free = !meets(g, lo, hi);
          EXPECT_TRUE(!sure || free)
              << "group " << g << " called sure but meets [" << lo << ", " << hi << ")";
          return free;
        }, work);
        ASSERT_EQ(found, expected) << "[" << lo << ", " << hi << ")";
        int g = found;
        if (g < 0) {
          g = index.AddGroup();
          groups.emplace_back();
        }
        groups[g].emplace_back(lo, hi);
        index.Add(g, lo, hi);
        ASSERT_TRUE(index.usable());
      }
    }
  }
}

// Past its memory cap the index gives up (and says so) instead of growing: the caller then
// tries the groups one by one.
TEST(FreeGroupIndexTest, GivesUpPastItsCap) {
  FreeGroupIndex index(/*num_segments=*/4096, /*max_bytes=*/1024);
  int64_t work = 0;
  int groups = 0;
  while (index.usable() && groups < 100000) {
    const int lo = (groups * 37) % 4000;
    ASSERT_EQ(index.FirstFree(lo, lo + 50, [](int, bool) { return false; }, work), -1);
    index.Add(index.AddGroup(), lo, lo + 50);
    ++groups;
  }
  EXPECT_FALSE(index.usable());
  EXPECT_LT(groups, 1000);  // 1 KiB of bitsets holds a few hundred groups' bits at most
}

}  // namespace
}  // namespace memonger
