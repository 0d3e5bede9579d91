#include "memonger/offsets/interval_index.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <ostream>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/offset_support.h"

namespace memonger {
namespace {

using ::testing::HasSubstr;

using ::memonger::testing::Item;

// The merged union of the byte ranges of `placed` items meeting `item` in time, pair by pair.
std::vector<std::pair<int64_t, int64_t>> BruteForceOccupied(const OffsetProblem& p,
                                                            const std::vector<int>& placed,
                                                            const std::vector<int64_t>& offsets,
                                                            int item) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const OffsetItem& q = p.items[item];
  for (int j : placed) {
    const OffsetItem& o = p.items[j];
    if (o.bytes > 0 && o.first_step <= q.last_step && q.first_step <= o.last_step) {
      ranges.emplace_back(offsets[j], offsets[j] + o.bytes);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

// Bucket sizes from one segment per leaf (a plain segment tree) to one bucket for everything,
// and path lists at every depth or none, so that every kind of node and entry is met.
class OffsetIntervalIndexShapesTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(OffsetIntervalIndexShapesTest, MatchesBruteForceOnRandomPlacements) {
  const auto [bucket_entries, path_depth] = GetParam();
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    OffsetProblem p;
    p.num_steps = 1 + static_cast<int>(rng() % 60);
    const int n = 1 + static_cast<int>(rng() % 80);
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % p.num_steps);
      const int last = first + static_cast<int>(rng() % (p.num_steps - first));
      p.items.push_back(Item(first, last, static_cast<int64_t>(rng() % 20)));
    }
    ASSERT_TRUE(ValidateOffsetProblem(p).ok());
    IntervalIndex index(p, path_depth, bucket_entries);
    // Random (possibly overlapping) offsets: the index must not care.
    std::vector<int64_t> offsets(n);
    std::vector<int> placed;
    std::vector<ByteRange> got;
    for (int round = 0; round < 2; ++round) {
      index.Clear();
      placed.clear();
      for (int i = 0; i < n; ++i) {
        offsets[i] = static_cast<int64_t>(rng() % 100);
        index.Insert(i, offsets[i], p.items[i].bytes);
        placed.push_back(i);
        const int query = static_cast<int>(rng() % n);
        index.OccupiedDuring(query, got);
        const auto want = BruteForceOccupied(p, placed, offsets, query);
        ASSERT_EQ(got.size(), want.size()) << "query " << query << " after " << i;
        for (size_t k = 0; k < want.size(); ++k) {
          EXPECT_EQ(got[k].begin, want[k].first);
          EXPECT_EQ(got[k].end, want[k].second);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OffsetIntervalIndexShapesTest,
    ::testing::Values(std::pair{1, IntervalIndex::kDefaultPathDepth}, std::pair{1, 0},
                      std::pair{2, 1}, std::pair{3, 2}, std::pair{5, 0},
                      std::pair{8, IntervalIndex::kDefaultPathDepth}, std::pair{1000, 6},
                      std::pair{IntervalIndex::kDefaultBucketEntries,
                                IntervalIndex::kDefaultPathDepth}));

// Many long-lived items at scattered offsets: the lists a query reads hold hundreds of ranges
// (more than the few the index merges directly), so holes are cut list by list. With min_gap,
// holes of fewer bytes may be filled, and every hole of min_gap bytes or more must be exact.
TEST_P(OffsetIntervalIndexShapesTest, LongListsAndMinimumGapsMatchBruteForce) {
  const auto [bucket_entries, path_depth] = GetParam();
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    OffsetProblem p;
    p.num_steps = 400;
    const int n = 600;
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % p.num_steps);
      const int last = std::min(p.num_steps - 1, first + static_cast<int>(rng() % 300));
      p.items.push_back(Item(first, last, 1 + static_cast<int64_t>(rng() % 12)));
    }
    IntervalIndex index(p, path_depth, bucket_entries);
    std::vector<int64_t> offsets(n);
    std::vector<int> placed;
    std::vector<ByteRange> got;
    for (int i = 0; i < n; ++i) {
      offsets[i] = static_cast<int64_t>(rng() % 4000);
      index.Insert(i, offsets[i], p.items[i].bytes);
      placed.push_back(i);
      if (i % 7 != 0) continue;
      const int query = static_cast<int>(rng() % n);
      const int64_t min_gap = 1 + static_cast<int64_t>(rng() % 16);
      index.OccupiedDuring(query, got, min_gap);
      const auto want = BruteForceOccupied(p, placed, offsets, query);
      // The ranges got are sorted, disjoint and apart, end where the true union ends, and leave
      // free only true holes (below the lowest range too), every one of min_gap bytes or more.
      const auto holes_of = [](const auto& ranges, auto begin_of, auto end_of) {
        std::vector<std::pair<int64_t, int64_t>> holes;
        int64_t from = 0;
        for (const auto& r : ranges) {
          if (begin_of(r) > from) holes.emplace_back(from, begin_of(r));
          from = end_of(r);
        }
        return holes;
      };
      for (size_t k = 0; k + 1 < got.size(); ++k) {
        ASSERT_LT(got[k].end, got[k + 1].begin) << "query " << query << " after " << i;
      }
      const auto got_holes = holes_of(
          got, [](const ByteRange& r) { return r.begin; }, [](const ByteRange& r) { return r.end; });
      const auto all_holes = holes_of(
          want, [](const auto& r) { return r.first; }, [](const auto& r) { return r.second; });
      ASSERT_EQ(got.empty(), want.empty());
      if (want.empty()) continue;
      EXPECT_EQ(got.back().end, want.back().second) << "query " << query << " after " << i;
      for (const auto& hole : got_holes) {  // holes under min_gap may be kept or filled
        EXPECT_TRUE(std::find(all_holes.begin(), all_holes.end(), hole) != all_holes.end())
            << "query " << query << " after " << i << ": hole " << hole.first << "-"
            << hole.second << " is not free";
      }
      for (const auto& hole : all_holes) {
        if (hole.second - hole.first < min_gap) continue;
        EXPECT_TRUE(std::find(got_holes.begin(), got_holes.end(), hole) != got_holes.end())
            << "query " << query << " after " << i << ": hole " << hole.first << "-"
            << hole.second << " was filled";
      }
    }
  }
}

TEST(OffsetIntervalIndexTest, SparseStepsAreCompressed) {
  OffsetProblem p;
  p.num_steps = 1 << 30;
  p.items = {Item(0, 1000, 8), Item(1000, 1 << 29, 8), Item(1001, (1 << 30) - 1, 8)};
  IntervalIndex index(p);  // three items: a handful of segments, not 2^30
  index.Insert(0, 0, 8);
  std::vector<ByteRange> got;
  index.OccupiedDuring(1, got);  // meets item 0 at step 1000
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].begin, 0);
  index.OccupiedDuring(2, got);  // starts after item 0 ends
  EXPECT_TRUE(got.empty());
}

struct ChooseCase {
  std::string name;
  std::vector<ByteRange> occupied;
  int64_t bytes;
  int64_t alignment;
  int64_t best_fit;
  int64_t lowest_offset;
};

void PrintTo(const ChooseCase& c, std::ostream* os) { *os << c.name; }

class OffsetChooseOffsetTest : public ::testing::TestWithParam<ChooseCase> {};

TEST_P(OffsetChooseOffsetTest, BothRules) {
  const ChooseCase& c = GetParam();
  EXPECT_EQ(ChooseOffset(c.occupied, c.bytes, c.alignment, FitRule::kBestFit), c.best_fit);
  EXPECT_EQ(ChooseOffset(c.occupied, c.bytes, c.alignment, FitRule::kLowestOffset),
            c.lowest_offset);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OffsetChooseOffsetTest,
    ::testing::Values(
        ChooseCase{"Empty", {}, 10, 1, /*best_fit=*/0, /*lowest_offset=*/0},
        ChooseCase{"OnTop", {{0, 10}}, 5, 1, 10, 10},
        ChooseCase{"OnTopAligned", {{0, 10}}, 16, 16, 16, 16},
        ChooseCase{"SmallestGapWins", {{20, 30}, {35, 40}}, 5, 1, /*best_fit=*/30,
                   /*lowest_offset=*/0},
        ChooseCase{"TiesGoLowest", {{5, 10}, {15, 20}}, 5, 1, 0, 0},
        ChooseCase{"AlignmentSkipsATooSmallGap", {{0, 3}, {12, 40}}, 8, 8, /*best_fit=*/40,
                   /*lowest_offset=*/40},
        ChooseCase{"AlignedStartInsideAGap", {{0, 3}, {16, 40}}, 8, 8, 8, 8},
        ChooseCase{"GapBelowFirstRange", {{8, 16}}, 8, 1, 0, 0}),
    [](const ::testing::TestParamInfo<ChooseCase>& info) { return info.param.name; });

TEST(OffsetGreedyPlacerTest, PlaceFromAPrefixEqualsAFullPlacement) {
  std::mt19937_64 rng(7);
  OffsetProblem p;
  p.num_steps = 30;
  for (int i = 0; i < 60; ++i) {
    const int first = static_cast<int>(rng() % 30);
    p.items.push_back(Item(first, first + static_cast<int>(rng() % (30 - first)),
                           8 * (1 + static_cast<int64_t>(rng() % 10)), 8));
  }
  std::vector<int> order(p.items.size());
  std::iota(order.begin(), order.end(), 0);
  GreedyPlacer placer(p);
  const OffsetSolution full = placer.Place(order, FitRule::kBestFit);
  for (int keep : {0, 1, 17, 59, 60}) {
    const std::optional<OffsetSolution> again =
        placer.PlaceFrom(order, FitRule::kBestFit, keep, full.offsets);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->offsets, full.offsets) << keep;
    EXPECT_EQ(again->height, full.height) << keep;
  }
  // A limit below the height gives up; at the height it does not.
  EXPECT_FALSE(placer.PlaceFrom(order, FitRule::kBestFit, 0, {}, full.height - 1).has_value());
  EXPECT_TRUE(placer.PlaceFrom(order, FitRule::kBestFit, 0, {}, full.height).has_value());
  EXPECT_TRUE(CheckOffsetSolution(p, full.offsets).ok());
  // A deadline that has passed stops a pass before it places anything; a later one changes
  // nothing.
  const auto now = std::chrono::steady_clock::now();
  EXPECT_FALSE(placer.PlaceFrom(order, FitRule::kBestFit, 0, {},
                                std::numeric_limits<int64_t>::max(), now)
                   .has_value());
  const std::optional<OffsetSolution> in_time =
      placer.PlaceFrom(order, FitRule::kBestFit, 0, {}, std::numeric_limits<int64_t>::max(),
                       now + std::chrono::hours(1));
  ASSERT_TRUE(in_time.has_value());
  EXPECT_EQ(in_time->offsets, full.offsets);
}

TEST(OffsetValidateProblemTest, NamesTheBadItem) {
  OffsetProblem p;
  p.num_steps = 4;
  p.items = {Item(0, 1, 8), Item(2, 4, 8)};
  EXPECT_THAT(std::string(ValidateOffsetProblem(p).message()),
              HasSubstr("item 1 has lifetime [2, 4]"));
  p.items[1] = Item(2, 1, 8);
  EXPECT_FALSE(ValidateOffsetProblem(p).ok());
  p.items[1] = Item(0, 1, -1);
  EXPECT_THAT(std::string(ValidateOffsetProblem(p).message()), HasSubstr("negative bytes"));
  p.items[1] = Item(0, 1, 12, 12);
  EXPECT_THAT(std::string(ValidateOffsetProblem(p).message()), HasSubstr("alignment 12"));
  p.items[1] = Item(0, 1, 3, 2);  // bytes are rounded up to the alignment before planning
  EXPECT_THAT(std::string(ValidateOffsetProblem(p).message()),
              HasSubstr("item 1 has 3 bytes, not a multiple of its alignment 2"));
  p.items[1] = Item(0, 1, INT64_MAX - 4);
  EXPECT_THAT(std::string(ValidateOffsetProblem(p).message()), HasSubstr("2^63"));
  p.items[1] = Item(0, 3, 8);
  EXPECT_TRUE(ValidateOffsetProblem(p).ok());
  // step_times: one per step, increasing.
  p.step_times = {10, 20, 30};
  EXPECT_THAT(std::string(ValidateOffsetProblem(p).message()), HasSubstr("3 step times for 4"));
  p.step_times = {10, 20, 20, 40};
  EXPECT_THAT(std::string(ValidateOffsetProblem(p).message()),
              HasSubstr("not increasing at step 2"));
  p.step_times = {10, 20, 30, 40};
  EXPECT_TRUE(ValidateOffsetProblem(p).ok());
}

// Durations come from step_times when a problem has them: the search orders see how long an
// item lives in the problem's own time, not how many compressed steps it spans.
TEST(OffsetValidateProblemTest, DurationUsesStepTimes) {
  OffsetProblem p;
  p.num_steps = 3;
  p.items = {Item(0, 2, 8), Item(1, 1, 8)};
  EXPECT_EQ(Duration(p, p.items[0]), 3);
  EXPECT_EQ(Duration(p, p.items[1]), 1);
  p.step_times = {0, 1000, 1001};
  EXPECT_EQ(Duration(p, p.items[0]), 1002);
  EXPECT_EQ(Duration(p, p.items[1]), 1);
}

// A cut pass whose first item sits high (as the busiest item of a peak order can): the lanes
// above it would double the arena, so every item goes in lanes from 0, unless the placed items
// must stay (a split pass's crossing items).
TEST(CompleteCutPassTest, EveryItemInLanesWhereThePlacedPartSitsHigh) {
  OffsetProblem p;
  p.num_steps = 10;
  for (int i = 0; i < 10; ++i) p.items.push_back(Item(0, 9, 8));
  std::vector<int> order(10);
  std::iota(order.begin(), order.end(), 0);
  for (int keep : {0, 1}) {
    SCOPED_TRACE(keep);
    OffsetSolution s;
    s.offsets.assign(10, 0);
    s.offsets[0] = 1000;  // valid: the only item placed
    s.height = 1008;
    CompleteCutPass(p, order, keep, /*placed=*/1, s);
    ASSERT_TRUE(CheckOffsetSolution(p, s.offsets).ok()) << CheckOffsetSolution(p, s.offsets);
    EXPECT_EQ(s.height, OffsetHeight(p, s.offsets));
    if (keep == 0) {
      EXPECT_EQ(s.height, 80);  // ten lanes of 8 bytes from 0
    } else {
      EXPECT_EQ(s.offsets[0], 1000);  // kept where it was
      EXPECT_EQ(s.height, 1008 + 72);
    }
  }
}

}  // namespace
}  // namespace memonger
