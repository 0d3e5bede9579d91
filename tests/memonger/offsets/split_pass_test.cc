// The split pass (memonger/offsets/split_pass.h): where it cuts time, that every item lands in
// exactly one part, and that the placement is valid and the same for every thread count, also
// when a deadline cuts it. Small problems are split with small pieces; one test runs the
// portfolio on a problem large enough to be split by default.
#include "memonger/offsets/split_pass.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/offset_problem.h"
#include "tests/offset_support.h"
#include "util/splitmix64.h"

namespace memonger {
namespace {

using ::memonger::testing::Item;
using Clock = std::chrono::steady_clock;

// Mostly short lifetimes, some long ones (they cross cuts), mixed sizes and alignments, a few
// zero-byte items.
OffsetProblem RandomProblem(uint64_t seed, int items) {
  util::SplitMix64 rng(seed);
  OffsetProblem p;
  p.num_steps = 400 + static_cast<int>(rng.Below(1000));
  for (int i = 0; i < items; ++i) {
    const int first = static_cast<int>(rng.Below(static_cast<uint64_t>(p.num_steps)));
    const uint64_t room = static_cast<uint64_t>(p.num_steps - first);
    const uint64_t span = rng.Percent(1) ? room : std::min<uint64_t>(room, 6);
    const int last = first + static_cast<int>(rng.Below(span));
    const int64_t alignment = int64_t{1} << rng.Below(4);
    const int64_t units = rng.Percent(3) ? 0 : 1 + static_cast<int64_t>(rng.Below(100));
    p.items.push_back(Item(first, last, units * alignment, alignment));
  }
  return p;
}

std::vector<int> PeakOrder(const OffsetProblem& p) {
  return PortfolioItemOrder(p, PortfolioOrder::kPeak);
}

TEST(SplitInTimeTest, SmallProblemsAreNotSplit) {
  const OffsetProblem p = RandomProblem(1, 2 * kSplitPieceItems - 1);
  EXPECT_FALSE(SplitInTime(p, PeakOrder(p)).has_value());
  EXPECT_FALSE(SplitInTime(p, PeakOrder(p), /*piece_items=*/p.items.size()).has_value());
}

TEST(SplitInTimeTest, EveryItemOnceInOrderInItsPiece) {
  int split_count = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed, 300 + static_cast<int>(seed) * 10);
    const std::vector<int> order = PeakOrder(p);
    std::optional<TimeSplit> split = SplitInTime(p, order, /*piece_items=*/50);
    if (!split.has_value()) continue;
    ++split_count;
    const std::vector<int>& cuts = split->cuts;
    ASSERT_FALSE(cuts.empty());
    ASSERT_EQ(split->pieces.size(), cuts.size() + 1);
    EXPECT_LE(static_cast<int>(cuts.size()), kMaxSplitPieces - 1);
    EXPECT_TRUE(std::is_sorted(cuts.begin(), cuts.end()));
    EXPECT_EQ(std::adjacent_find(cuts.begin(), cuts.end()), cuts.end());
    EXPECT_GE(cuts.front(), 0);
    EXPECT_LT(cuts.back(), p.num_steps - 1);
    EXPECT_LE(split->crossing.size() * kMaxCrossingShare, p.items.size());

    std::vector<int> position(p.items.size());
    for (size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<int>(k);
    std::vector<int> seen(p.items.size(), 0);
    auto check_in_order = [&](const std::vector<int>& items) {
      for (size_t k = 0; k < items.size(); ++k) {
        ++seen[items[k]];
        if (k > 0) {
          EXPECT_LT(position[items[k - 1]], position[items[k]]);
        }
      }
    };
    auto crosses = [&](int i) {
      for (int cut : cuts) {
        if (p.items[i].first_step <= cut && cut < p.items[i].last_step) return true;
      }
      return false;
    };
    check_in_order(split->crossing);
    for (int i : split->crossing) EXPECT_TRUE(crosses(i)) << "item " << i;
    for (size_t piece = 0; piece < split->pieces.size(); ++piece) {
      check_in_order(split->pieces[piece]);
      const int first = piece == 0 ? 0 : cuts[piece - 1] + 1;
      const int last = piece + 1 == split->pieces.size() ? p.num_steps - 1 : cuts[piece];
      for (int i : split->pieces[piece]) {
        EXPECT_FALSE(crosses(i)) << "item " << i;
        EXPECT_GE(p.items[i].first_step, first) << "item " << i;
        EXPECT_LE(p.items[i].last_step, last) << "item " << i;
      }
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
  EXPECT_GE(split_count, 40);  // most of them split: the test checks something
}

TEST(SplitInTimeTest, TooManyCrossingItemsIsNoSplit) {
  // Every item lives across the middle: any cut there is crossed by all of them.
  OffsetProblem p;
  p.num_steps = 100;
  for (int i = 0; i < 400; ++i) p.items.push_back(Item(i % 40, 60 + i % 40, 8));
  EXPECT_FALSE(SplitInTime(p, PeakOrder(p), /*piece_items=*/50).has_value());
}

TEST(PlaceSplitTest, ValidAndTheSameForEveryThreadCount) {
  int split_count = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed, 500);
    std::optional<TimeSplit> split = SplitInTime(p, PeakOrder(p), /*piece_items=*/60);
    if (!split.has_value()) continue;
    ++split_count;
    for (FitRule rule : {FitRule::kBestFit, FitRule::kLowestOffset}) {
      std::optional<SplitPassResult> first;
      for (int threads : {1, 2, 3, 8}) {
        SplitPassOptions options;
        options.threads = threads;
        const SplitPassResult r = PlaceSplit(p, *split, rule, options);
        ASSERT_TRUE(CheckOffsetSolution(p, r.solution.offsets).ok())
            << CheckOffsetSolution(p, r.solution.offsets);
        EXPECT_EQ(r.solution.height, OffsetHeight(p, r.solution.offsets));
        EXPECT_GE(r.solution.height, OffsetLowerBound(p));
        EXPECT_EQ(r.placed_greedily, static_cast<int>(p.items.size()));
        if (!first.has_value()) {
          first = r;
        } else {
          EXPECT_EQ(r.solution.offsets, first->solution.offsets) << threads << " threads";
        }
      }
    }
  }
  EXPECT_GE(split_count, 25);
}

TEST(PlaceSplitTest, APassedDeadlineStillGivesAValidPlacement) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed, 600);
    std::optional<TimeSplit> split = SplitInTime(p, PeakOrder(p), /*piece_items=*/60);
    if (!split.has_value()) continue;
    SplitPassOptions options;
    options.threads = 1 + static_cast<int>(seed % 3);
    options.deadline = Clock::now() - std::chrono::seconds(1);
    options.finish_by = options.deadline;
    const SplitPassResult r = PlaceSplit(p, *split, FitRule::kBestFit, options);
    ASSERT_TRUE(CheckOffsetSolution(p, r.solution.offsets).ok())
        << CheckOffsetSolution(p, r.solution.offsets);
    EXPECT_EQ(r.solution.height, OffsetHeight(p, r.solution.offsets));
    EXPECT_LT(r.placed_greedily, static_cast<int>(p.items.size()));
  }
}

// Large enough for the portfolio to split its first run by default: valid, and the same for one
// thread and several. (`stop_after` has passed: only the first run is made, which keeps the
// test short.)
TEST(PlaceSplitTest, PortfolioSplitsLargeProblemsTheSameForAnyThreadCount) {
  const OffsetProblem p = RandomProblem(7, 2 * kSplitPieceItems + 1000);
  ASSERT_TRUE(SplitInTime(p, PeakOrder(p)).has_value());
  const Clock::time_point passed = Clock::now();
  absl::StatusOr<BestFitResult> one = RunBestFitPortfolio(p, passed, 1);
  absl::StatusOr<BestFitResult> two = RunBestFitPortfolio(p, passed, 2);
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_TRUE(CheckOffsetSolution(p, one->solution.offsets).ok());
  EXPECT_EQ(one->solution.offsets, two->solution.offsets);
  EXPECT_EQ(one->solution.height, two->solution.height);
}

}  // namespace
}  // namespace memonger
