#include "memonger/offsets/peak_window.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/offset_problem.h"
#include "tests/offset_support.h"

namespace memonger {
namespace {

using ::memonger::testing::Item;
using ::memonger::testing::OptimumByGrid;
using ::testing::HasSubstr;

// A small random problem and a poor valid placement of it (lowest offset in a random order). Its
// core, steps 0-3, mixes items aligned to 8 with odd unaligned ones (holes the odd items cannot
// fill push some optima above the most bytes live at one step); a sparse tail of small items
// over steps 5-9 keeps narrow windows a part of the problem.
struct Case {
  OffsetProblem problem;
  OffsetSolution incumbent;
};

Case RandomCase(uint32_t seed) {
  std::mt19937 rng(seed);
  Case c;
  c.problem.num_steps = 10;
  const int core = 4 + static_cast<int>(rng() % 3);
  for (int i = 0; i < core; ++i) {
    const int first = static_cast<int>(rng() % 4);
    const int last = std::min(3, first + static_cast<int>(rng() % 3));
    if (rng() % 2 == 0) {
      c.problem.items.push_back(Item(first, last, 8 * (1 + static_cast<int64_t>(rng() % 2)), 8));
    } else {
      c.problem.items.push_back(Item(first, last, 1 + 2 * static_cast<int64_t>(rng() % 6), 1));
    }
  }
  const int tail = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < tail; ++i) {
    const int first = 5 + static_cast<int>(rng() % 5);
    const int last = std::min(9, first + static_cast<int>(rng() % 3));
    c.problem.items.push_back(Item(first, last, 1 + static_cast<int64_t>(rng() % 4), 1));
  }
  const int n = static_cast<int>(c.problem.items.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  c.incumbent = GreedyPlacer(c.problem).Place(order, FitRule::kLowestOffset);
  return c;
}

// Against an exhaustive search: the plan is valid and never above the incumbent, the lower
// bound is never above the optimum (a window is a restriction of the problem), and "proven"
// means at the optimum. Narrow first windows, so that a window is often a part of the problem.
TEST(PeakWindowTest, PlansAndBoundsAgreeWithExhaustiveSearch) {
  int improved = 0;
  int bound_raised = 0;
  int proven_above_bound = 0;
  for (uint32_t seed = 1; seed <= 3000; ++seed) {
    SCOPED_TRACE(seed);
    const Case c = RandomCase(seed);
    PeakWindowOptions options;
    options.first_margin = 1 + static_cast<int>(seed % 2);
    options.max_window_share = 1;  // a handful of items: any window is a large share
    absl::StatusOr<PeakWindowResult> r = PlacePeakWindows(c.problem, c.incumbent, options);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(CheckOffsetSolution(c.problem, r->solution.offsets).ok())
        << CheckOffsetSolution(c.problem, r->solution.offsets);
    EXPECT_EQ(r->solution.height, OffsetHeight(c.problem, r->solution.offsets));
    EXPECT_LE(r->solution.height, c.incumbent.height);
    const int64_t max_live = OffsetLowerBound(c.problem);
    const int64_t optimum = OptimumByGrid(c.problem);
    EXPECT_GE(r->lower_bound, max_live);
    EXPECT_LE(r->lower_bound, optimum);
    EXPECT_GE(r->solution.height, optimum);
    EXPECT_EQ(r->solution.proven_optimal, r->solution.height == r->lower_bound);
    EXPECT_LE(r->fills, r->windows_solved);  // one fill per window solved below the incumbent
    improved += r->solution.height < c.incumbent.height;
    bound_raised += r->lower_bound > max_live;
    proven_above_bound += r->solution.proven_optimal && r->solution.height > max_live;

    // The same answer on two threads (each window's branch and bound races its preorders).
    if (seed % 10 == 0) {
      options.threads = 2;
      absl::StatusOr<PeakWindowResult> two = PlacePeakWindows(c.problem, c.incumbent, options);
      ASSERT_TRUE(two.ok()) << two.status();
      EXPECT_EQ(two->solution.offsets, r->solution.offsets);
      EXPECT_EQ(two->lower_bound, r->lower_bound);
    }
  }
  // Not vacuous: windows lower plans, and prove optima above the most bytes live at one step
  // (few of these problems have such an optimum: 5 of the 3,000; windows prove 4).
  EXPECT_GT(improved, 1000);
  EXPECT_GE(bound_raised, 2);
  EXPECT_GE(proven_above_bound, 2);
}

// A hand-made case whose optimum lies above the most bytes live at one step, where the window
// around the peak alone proves it. Step 1 holds 7 bytes: 5 unaligned and 2 aligned to 2, which
// fit in 7 only as [0,2) + [2,7). At steps 2-3 the 2-byte item keeps [0,2), and the 4-byte item
// aligned to 4 needs [4,8): 8 bytes. The last item (one byte, steps 7-11) is outside the window.
TEST(PeakWindowTest, WindowProvesAnOptimumAboveTheMostLiveBytes) {
  OffsetProblem problem;
  problem.num_steps = 12;
  problem.items = {Item(0, 1, 5, 1), Item(1, 4, 2, 2), Item(2, 3, 4, 4), Item(7, 11, 1, 1)};
  ASSERT_EQ(OffsetLowerBound(problem), 7);
  ASSERT_EQ(OptimumByGrid(problem), 8);
  OffsetSolution incumbent;
  incumbent.offsets = {0, 6, 8, 0};
  incumbent.height = 12;
  PeakWindowOptions options;
  options.first_margin = 1;
  options.max_window_share = 1;
  absl::StatusOr<PeakWindowResult> r = PlacePeakWindows(problem, incumbent, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->lower_bound, 8);
  EXPECT_EQ(r->solution.height, 8);
  EXPECT_TRUE(r->solution.proven_optimal);
  EXPECT_TRUE(CheckOffsetSolution(problem, r->solution.offsets).ok());
}

TEST(PeakWindowTest, NoSlackAndProvenPlansAreLeftAlone) {
  // Every step with a live item has the bound live: perfect packing's case.
  OffsetProblem no_slack;
  no_slack.num_steps = 4;
  no_slack.items = {Item(0, 3, 2), Item(0, 1, 3), Item(2, 3, 1), Item(2, 3, 2)};
  const OffsetSolution stacked = GreedyPlacer(no_slack).Place({3, 2, 1, 0}, FitRule::kBestFit);
  absl::StatusOr<PeakWindowResult> r = PlacePeakWindows(no_slack, stacked);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->windows_solved, 0);
  EXPECT_EQ(r->solution.offsets, stacked.offsets);

  const Case c = RandomCase(7);
  absl::StatusOr<BestFitResult> best = RunBestFitPortfolio(c.problem);
  ASSERT_TRUE(best.ok()) << best.status();
  if (best->solution.proven_optimal) {
    r = PlacePeakWindows(c.problem, best->solution);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->windows_solved, 0);
    EXPECT_TRUE(r->solution.proven_optimal);
  }
}

// The incumbent's height is computed from its offsets: a caller's wrong height proves nothing.
TEST(PeakWindowTest, TheIncumbentsHeightIsComputed) {
  OffsetProblem problem;
  problem.num_steps = 4;
  problem.items = {Item(0, 0, 4), Item(1, 1, 4), Item(2, 2, 4), Item(3, 3, 1)};
  OffsetSolution claimed;
  claimed.offsets = {0, 4, 8, 0};
  claimed.height = 0;  // the real height is 12
  absl::StatusOr<PeakWindowResult> r = PlacePeakWindows(problem, claimed);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.height, OffsetHeight(problem, r->solution.offsets));
  EXPECT_GE(r->solution.height, 4);
  EXPECT_EQ(r->solution.proven_optimal, r->solution.height == 4);
  // Unaligned bytes are refused up front (ValidateOffsetProblem), not deep in a window.
  problem.items[0] = Item(0, 0, 3, 2);
  EXPECT_FALSE(PlacePeakWindows(problem, claimed).ok());
}

TEST(PeakWindowTest, RefusesAnInvalidIncumbent) {
  OffsetProblem problem;
  problem.num_steps = 3;
  problem.items = {Item(0, 1, 4), Item(1, 2, 4)};
  OffsetSolution overlapping;
  overlapping.offsets = {0, 2};
  overlapping.height = 6;
  absl::StatusOr<PeakWindowResult> r = PlacePeakWindows(problem, overlapping);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("invalid incumbent"));
  OffsetSolution short_one;
  short_one.offsets = {0};
  EXPECT_FALSE(PlacePeakWindows(problem, short_one).ok());
  PeakWindowOptions bad;
  bad.max_window_items = 0;
  OffsetSolution fine;
  fine.offsets = {0, 4};
  fine.height = 8;
  EXPECT_FALSE(PlacePeakWindows(problem, fine, bad).ok());
  bad = PeakWindowOptions{};
  bad.max_window_share = 0;
  EXPECT_FALSE(PlacePeakWindows(problem, fine, bad).ok());
}

}  // namespace
}  // namespace memonger
