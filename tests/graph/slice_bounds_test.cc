// NormalizeSlice (graph/slice_bounds.h): the elements a Slice reads, as the kernel and the
// gradient builder both take them, against a direct enumeration of Python's slicing rules.
#include "graph/slice_bounds.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace memonger::graph {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Python's range(*slice(start, end, step).indices(n)) for one axis.
std::vector<int64_t> Indices(int64_t n, int64_t start, int64_t end, int64_t step) {
  auto norm = [n, step](int64_t v) {
    if (v < 0) return v < -n ? (step < 0 ? int64_t{-1} : int64_t{0}) : v + n;
    return v >= n ? (step < 0 ? n - 1 : n) : v;
  };
  std::vector<int64_t> out;
  const int64_t s = norm(start), e = norm(end);
  for (int64_t i = s; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

TEST(SliceBoundsTest, EveryBoundAndStepReadsWhatPythonSlicingReads) {
  const int64_t n = 7;
  for (int64_t start : {kMin, int64_t{-9}, int64_t{-3}, int64_t{0}, int64_t{2}, int64_t{6},
                        int64_t{9}, kMax}) {
    for (int64_t end : {kMin, int64_t{-9}, int64_t{-1}, int64_t{0}, int64_t{4}, int64_t{7},
                        kMax}) {
      for (int64_t step : {int64_t{-3}, int64_t{-1}, int64_t{1}, int64_t{2}, int64_t{5}}) {
        SCOPED_TRACE(testing::Message() << start << ":" << end << ":" << step);
        absl::StatusOr<SliceBounds> b = NormalizeSlice({3, n}, {start}, {end}, {-1}, {step});
        ASSERT_TRUE(b.ok()) << b.status();
        const std::vector<int64_t> want = Indices(n, start, end, step);
        ASSERT_EQ(b->count[1], static_cast<int64_t>(want.size()));
        EXPECT_EQ(b->count[0], 3);  // not named: read whole
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_EQ(b->first[1] + static_cast<int64_t>(i) * b->step[1], want[i]);
        }
      }
    }
  }
}

TEST(SliceBoundsTest, BadListsAreInvalidArgument) {
  EXPECT_FALSE(NormalizeSlice({4}, {0}, {1, 2}, {}, {}).ok());
  EXPECT_FALSE(NormalizeSlice({4}, {0}, {1}, {1}, {}).ok());      // axis outside rank 1
  EXPECT_FALSE(NormalizeSlice({4, 4}, {0, 0}, {1, 1}, {0, -2}, {}).ok());  // axis 0 twice
  EXPECT_FALSE(NormalizeSlice({4}, {0}, {1}, {}, {0}).ok());      // step 0
}

}  // namespace
}  // namespace memonger::graph
