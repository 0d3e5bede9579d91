// What a time-limited greedy pass does when its deadline passes: the quick completions
// (lane_stacking.h, skyline_completion.h), GreedyPlacer::PlaceUntil, the portfolio's first run
// and greedy-by-size under a deadline. Every placement is checked by CheckOffsetSolution.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/greedy_by_size.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/lane_stacking.h"
#include "memonger/offsets/offset_problem.h"
#include "memonger/offsets/skyline_completion.h"
#include "tests/offset_support.h"
#include "util/splitmix64.h"

namespace memonger {
namespace {

using ::memonger::testing::Item;
using Clock = std::chrono::steady_clock;

// Mixed sizes, lifetimes and alignments over a few hundred steps; some zero-byte items.
OffsetProblem RandomProblem(uint64_t seed, int items = 300) {
  util::SplitMix64 rng(seed);
  OffsetProblem p;
  p.num_steps = 1 + static_cast<int>(rng.Below(400));
  for (int i = 0; i < items; ++i) {
    const int first = static_cast<int>(rng.Below(static_cast<uint64_t>(p.num_steps)));
    const uint64_t room = static_cast<uint64_t>(p.num_steps - first);
    const int last = first + static_cast<int>(rng.Below(rng.Percent(20) ? room : std::min<uint64_t>(room, 12)));
    const int64_t alignment = int64_t{1} << rng.Below(seed % 2 == 0 ? 1 : 8);
    const int64_t units = rng.Percent(5) ? 0 : 1 + static_cast<int64_t>(rng.Below(rng.Percent(10) ? 5000 : 64));
    p.items.push_back(Item(first, last, units * alignment, alignment));
  }
  return p;
}

int64_t TopOf(const OffsetProblem& p, const std::vector<int64_t>& offsets) {
  int64_t top = 0;
  for (size_t i = 0; i < p.items.size(); ++i) {
    if (p.items[i].bytes > 0) top = std::max(top, offsets[i] + p.items[i].bytes);
  }
  return top;
}

// A valid placement of order[0, placed) (greedy, best fit) and the rest of the order.
struct Partial {
  std::vector<int> order;
  std::vector<int> placed;
  std::vector<int> rest;
  std::vector<int64_t> offsets;
  int64_t height = 0;
};

Partial PlaceAPrefix(const OffsetProblem& p, uint64_t seed) {
  util::SplitMix64 rng(seed * 7919);
  Partial partial;
  partial.order.resize(p.items.size());
  std::iota(partial.order.begin(), partial.order.end(), 0);
  for (size_t i = partial.order.size(); i > 1; --i) {
    std::swap(partial.order[i - 1], partial.order[rng.Below(i)]);
  }
  const size_t cut = rng.Below(p.items.size() + 1);
  partial.placed.assign(partial.order.begin(), partial.order.begin() + cut);
  partial.rest.assign(partial.order.begin() + cut, partial.order.end());
  // The prefix alone, placed greedily, is valid: place it as a problem of its own.
  OffsetProblem prefix;
  prefix.num_steps = p.num_steps;
  for (int i : partial.placed) prefix.items.push_back(p.items[i]);
  std::vector<int> prefix_order(prefix.items.size());
  std::iota(prefix_order.begin(), prefix_order.end(), 0);
  GreedyPlacer placer(prefix);
  const OffsetSolution s = placer.Place(prefix_order, FitRule::kBestFit);
  partial.offsets.assign(p.items.size(), -1);
  for (size_t k = 0; k < partial.placed.size(); ++k) partial.offsets[partial.placed[k]] = s.offsets[k];
  partial.height = s.height;
  return partial;
}

TEST(LaneStackingTest, CompletesAValidPlacementAboveTheBase) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    Partial partial = PlaceAPrefix(p, seed);
    const int64_t height = StackInLanes(p, partial.rest, partial.height, partial.offsets);
    ASSERT_TRUE(CheckOffsetSolution(p, partial.offsets).ok())
        << CheckOffsetSolution(p, partial.offsets);
    EXPECT_EQ(height, std::max(partial.height, TopOf(p, partial.offsets)));
    for (int i : partial.rest) {
      if (p.items[i].bytes > 0) {
        EXPECT_GE(partial.offsets[i], partial.height) << "item " << i;
      }
    }
  }
}

TEST(LaneStackingTest, LanesOfOneSizeAreAsManyAsItemsLiveAtOnce) {
  // Equal sizes: interval partitioning is optimal, the lanes reach the lower bound.
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE(seed);
    OffsetProblem p = RandomProblem(seed);
    for (OffsetItem& item : p.items) {
      item.bytes = 96;
      item.alignment = 32;
    }
    std::vector<int> all(p.items.size());
    std::iota(all.begin(), all.end(), 0);
    std::vector<int64_t> offsets(p.items.size(), 0);
    const int64_t height = StackInLanes(p, all, 0, offsets);
    ASSERT_TRUE(CheckOffsetSolution(p, offsets).ok());
    EXPECT_EQ(height, OffsetLowerBound(p));
  }
}

TEST(LaneStackingTest, StaysWithinTwiceTheSumOfTheSizeClassesPeaks) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(seed);
    OffsetProblem p = RandomProblem(seed);
    for (OffsetItem& item : p.items) item.alignment = 1;  // no padding in the bound
    std::vector<int> all(p.items.size());
    std::iota(all.begin(), all.end(), 0);
    std::vector<int64_t> offsets(p.items.size(), 0);
    const int64_t height = StackInLanes(p, all, 0, offsets);
    ASSERT_TRUE(CheckOffsetSolution(p, offsets).ok());
    int64_t bound = 0;
    for (int c = 0; c < 63; ++c) {
      OffsetProblem in_class;
      in_class.num_steps = p.num_steps;
      for (const OffsetItem& item : p.items) {
        if (item.bytes >= (int64_t{1} << c) && item.bytes < (int64_t{1} << (c + 1))) {
          in_class.items.push_back(item);
        }
      }
      bound += 2 * OffsetLowerBound(in_class);
    }
    EXPECT_LE(height, bound);
  }
}

// Lanes are as tall as their class's largest item, so a class of few items, all live at one
// step, took more than the items one above the other: three lanes of 2,688 bytes for items of
// 2,508, 2,688 and 2,256 (7,452 bytes). A time limit that cut greedy-by-size and auto before
// their first item made a plan larger than no sharing at all (found by the planners fuzzer).
TEST(LaneStackingTest, NeverTakesMoreThanTheItemsOneAboveTheOther) {
  OffsetProblem p;
  p.num_steps = 4;
  p.items = {Item(0, 2, 2508), Item(2, 2, 2688), Item(2, 3, 2256)};
  std::vector<int64_t> offsets(p.items.size(), 0);
  EXPECT_EQ(StackInLanes(p, std::vector<int>{0, 1, 2}, 100, offsets), 100 + 7452);
  ASSERT_TRUE(CheckOffsetSolution(p, offsets).ok());
  // Mixed alignments in one class: each member rounded up to its own alignment, not the
  // class's largest (4,100 B aligned to 4 would take 8,192 B each).
  OffsetProblem mixed;
  mixed.num_steps = 1;
  mixed.items = {Item(0, 0, 4100, 4), Item(0, 0, 4096, 4096), Item(0, 0, 4100, 4)};
  std::vector<int64_t> at(mixed.items.size(), 0);
  EXPECT_EQ(StackInLanes(mixed, std::vector<int>{0, 1, 2}, 0, at), 4096 + 4100 + 4100);
  ASSERT_TRUE(CheckOffsetSolution(mixed, at).ok());
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    OffsetProblem random = RandomProblem(seed, 1 + static_cast<int>(seed % 40));
    for (OffsetItem& item : random.items) item.alignment = 1;  // no padding in the sum
    std::vector<int> all(random.items.size());
    std::iota(all.begin(), all.end(), 0);
    std::vector<int64_t> at(random.items.size(), 0);
    int64_t sum = 0;
    for (const OffsetItem& item : random.items) sum += item.bytes;
    EXPECT_LE(StackInLanes(random, all, 0, at), sum);
    ASSERT_TRUE(CheckOffsetSolution(random, at).ok());
  }
  // With alignments: no more than each item rounded up to its own alignment, plus the padding
  // of each size class's start to its largest alignment.
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem random = RandomProblem(2 * seed + 1, 1 + static_cast<int>(seed % 40));
    std::vector<int> all(random.items.size());
    std::iota(all.begin(), all.end(), 0);
    std::vector<int64_t> at(random.items.size(), 0);
    int64_t bound = 0;
    std::vector<int64_t> class_alignment(64, 0);
    for (const OffsetItem& item : random.items) {
      if (item.bytes == 0) continue;
      bound += (item.bytes + item.alignment - 1) / item.alignment * item.alignment;
      int64_t& a = class_alignment[63 - __builtin_clzll(static_cast<uint64_t>(item.bytes))];
      a = std::max(a, item.alignment);
    }
    for (int64_t a : class_alignment) bound += std::max<int64_t>(a - 1, 0);
    EXPECT_LE(StackInLanes(random, all, 0, at), bound);
    ASSERT_TRUE(CheckOffsetSolution(random, at).ok());
  }
}

TEST(SkylineCompletionTest, CompletesAValidPlacement) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    Partial partial = PlaceAPrefix(p, seed);
    const std::vector<int64_t> before = partial.offsets;
    const int64_t height = CompleteOnSkyline(p, partial.placed, partial.rest, partial.offsets);
    ASSERT_TRUE(CheckOffsetSolution(p, partial.offsets).ok())
        << CheckOffsetSolution(p, partial.offsets);
    EXPECT_EQ(height, TopOf(p, partial.offsets));
    for (int i : partial.placed) EXPECT_EQ(partial.offsets[i], before[i]) << "moved item " << i;
  }
}

TEST(SkylineCompletionTest, AnItemRestsOnTheHighestItemOfItsSteps) {
  OffsetProblem p;
  p.num_steps = 6;
  // Placed: 0 at [0, 100) over steps 0-1, 1 at [0, 40) over steps 3-5. Then 2 over steps 1-3
  // rests on item 0, the highest of its steps, and 3 over steps 4-5 on item 1.
  p.items = {Item(0, 1, 100), Item(3, 5, 40), Item(1, 3, 8, 8), Item(4, 5, 10)};
  std::vector<int64_t> offsets = {0, 0, -1, -1};
  const int64_t height = CompleteOnSkyline(p, std::vector<int>{0, 1}, std::vector<int>{2, 3}, offsets);
  EXPECT_EQ(offsets[2], 104);  // on item 0 (its step 1), 100 aligned up to 8
  EXPECT_EQ(offsets[3], 40);   // on item 1: item 2 ends at step 3
  EXPECT_EQ(height, 112);
  ASSERT_TRUE(CheckOffsetSolution(p, offsets).ok());
}

TEST(GreedyPlacerTest, PlaceUntilAPassedDeadlineStillPlacesEverything) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed, 3000);
    std::vector<int> order(p.items.size());
    std::iota(order.begin(), order.end(), 0);
    GreedyPlacer placer(p);
    int placed = -1;
    const OffsetSolution cut =
        placer.PlaceUntil(order, FitRule::kBestFit, Clock::now(), Clock::now(), &placed);
    EXPECT_EQ(placed, 0);  // the clock is read before the first item
    ASSERT_TRUE(CheckOffsetSolution(p, cut.offsets).ok());
    EXPECT_EQ(cut.height, TopOf(p, cut.offsets));
    // Without a deadline that bites, the same as Place.
    const auto later = Clock::now() + std::chrono::hours(1);
    const OffsetSolution whole = placer.PlaceUntil(order, FitRule::kBestFit, later, later, &placed);
    EXPECT_EQ(placed, static_cast<int>(p.items.size()));
    EXPECT_EQ(whole.offsets, placer.Place(order, FitRule::kBestFit).offsets);
  }
}

// A kept prefix is put back whole, and the time it took is no measure of the greedy rate: a
// pass that has placed nothing greedily at its deadline is not "on course", however far off
// finish_by is, and the kept items stay where they were.
TEST(GreedyPlacerTest, PlaceUntilKeepsAPrefixWholeAndJudgesTheRateAfterIt) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed, 3000);
    std::vector<int> order(p.items.size());
    std::iota(order.begin(), order.end(), 0);
    GreedyPlacer placer(p);
    const std::vector<int64_t> whole = placer.Place(order, FitRule::kBestFit).offsets;
    const int keep = 2000;
    int placed = -1;
    const OffsetSolution cut =
        placer.PlaceUntil(order, FitRule::kBestFit, Clock::now() - std::chrono::seconds(1),
                          Clock::now() + std::chrono::hours(1), &placed, keep, whole);
    EXPECT_EQ(placed, keep);
    ASSERT_TRUE(CheckOffsetSolution(p, cut.offsets).ok());
    EXPECT_EQ(cut.height, TopOf(p, cut.offsets));
    for (int k = 0; k < keep; ++k) EXPECT_EQ(cut.offsets[order[k]], whole[order[k]]) << k;
  }
}

TEST(BestFitPortfolioTest, FirstRunUnderAPassedDeadlineIsCompletedAndSaysSo) {
  const OffsetProblem p = RandomProblem(11, 5000);
  const auto now = Clock::now();
  absl::StatusOr<BestFitResult> cut = RunBestFitPortfolio(p, now, 2, now);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_TRUE(cut->first_run_cut);
  EXPECT_EQ(cut->runs, 1);
  EXPECT_GT(cut->solution.cut_pass_seconds_short, 0);
  ASSERT_TRUE(CheckOffsetSolution(p, cut->solution.offsets).ok());
  // A deadline far off changes nothing: the portfolio's own plan, nothing cut.
  absl::StatusOr<BestFitResult> full = RunBestFitPortfolio(p);
  absl::StatusOr<BestFitResult> late =
      RunBestFitPortfolio(p, std::nullopt, 2, Clock::now() + std::chrono::hours(1));
  ASSERT_TRUE(full.ok() && late.ok());
  EXPECT_FALSE(late->first_run_cut);
  EXPECT_EQ(late->solution.cut_pass_seconds_short, 0);
  EXPECT_EQ(late->solution.offsets, full->solution.offsets);
}

// greedy-by-size keeps a time limit as the portfolio's first run does: a limit of 0 cuts the
// pass before its first item (then every item is placed by the completion, validly, and the
// solution says the pass fell short); a limit it is well within gives TFLite's plan exactly.
TEST(GreedyBySizeTest, WithinALimitIsCutAndCompletedOrExactlyTheWholePass) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed, 3000);
    absl::StatusOr<OffsetSolution> cut = PlanGreedyBySizeWithin(p, util::Deadline(Clock::now(), 0));
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_GT(cut->cut_pass_seconds_short, 0);
    ASSERT_TRUE(CheckOffsetSolution(p, cut->offsets).ok());
    EXPECT_EQ(cut->height, TopOf(p, cut->offsets));
    absl::StatusOr<OffsetSolution> whole = PlanGreedyBySize(p);
    absl::StatusOr<OffsetSolution> within =
        PlanGreedyBySizeWithin(p, util::Deadline(Clock::now(), 3600));
    ASSERT_TRUE(whole.ok() && within.ok());
    EXPECT_EQ(within->cut_pass_seconds_short, 0);
    EXPECT_EQ(within->offsets, whole->offsets);
    EXPECT_EQ(within->proven_optimal, whole->proven_optimal);
  }
  EXPECT_FALSE(PlanGreedyBySizeWithin(RandomProblem(1), util::Deadline(Clock::now(), -1)).ok());
}

}  // namespace
}  // namespace memonger
