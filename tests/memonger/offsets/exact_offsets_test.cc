#include "memonger/offsets/exact_offsets.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/records.h"
#include "gtest/gtest.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/offset_problem.h"
#include "tests/test_support.h"
#include "tests/offset_support.h"

namespace memonger {
namespace {

using ::testing::HasSubstr;

using ::memonger::testing::Item;
using ::memonger::testing::OptimumByGrid;

OffsetProblem Problem(std::vector<OffsetItem> items) {
  OffsetProblem problem;
  for (const OffsetItem& item : items) {
    problem.num_steps = std::max(problem.num_steps, item.last_step + 1);
  }
  problem.items = std::move(items);
  return problem;
}

bool ShareAStep(const OffsetItem& a, const OffsetItem& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

int64_t AlignUp(int64_t x, int64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

// Oracle 1: the lowest height over every placement order, each item at the lowest aligned
// offset free of the items placed before it. Some order rebuilds a compacted optimal placement
// exactly, so this is the optimum (n! orders: small n only).
int64_t OptimumByOrders(const OffsetProblem& problem) {
  const int n = static_cast<int>(problem.items.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  int64_t best = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> offsets(n);
  do {
    int64_t height = 0;
    for (int k = 0; k < n; ++k) {
      const OffsetItem& item = problem.items[order[k]];
      std::vector<int64_t> candidates = {0};
      for (int j = 0; j < k; ++j) {
        const OffsetItem& placed = problem.items[order[j]];
        if (ShareAStep(item, placed)) {
          candidates.push_back(AlignUp(offsets[order[j]] + placed.bytes, item.alignment));
        }
      }
      std::sort(candidates.begin(), candidates.end());
      for (int64_t offset : candidates) {
        bool free = true;
        for (int j = 0; j < k && free; ++j) {
          const OffsetItem& placed = problem.items[order[j]];
          free = !ShareAStep(item, placed) || item.bytes == 0 || placed.bytes == 0 ||
                 offset + item.bytes <= offsets[order[j]] ||
                 offsets[order[j]] + placed.bytes <= offset;
        }
        if (free) {
          offsets[order[k]] = offset;
          break;
        }
      }
      height = std::max(height, offsets[order[k]] + item.bytes);
    }
    best = std::min(best, height);
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

// n items over `steps` steps, each live 1-4 steps; alignment 1, 2 or 4; bytes a multiple of
// it (0 now and then).
OffsetProblem RandomProblem(int n, int steps, int max_units, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<OffsetItem> items;
  for (int i = 0; i < n; ++i) {
    const int first = static_cast<int>(rng() % steps);
    const int last = std::min(steps - 1, first + static_cast<int>(rng() % 4));
    const int64_t alignment = int64_t{1} << (rng() % 3);
    const int64_t units = rng() % 16 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % max_units);
    items.push_back(Item(first, last, units * alignment, alignment));
  }
  return Problem(items);
}

// n items over `steps` steps, live 1-4 steps: half aligned to 8 (8 or 16 bytes), the rest odd
// sizes of 1-11 bytes, unaligned. Holes the small items cannot fill push some optima above the
// bound.
OffsetProblem MixedAlignmentProblem(int n, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<OffsetItem> items;
  for (int i = 0; i < n; ++i) {
    const int first = static_cast<int>(rng() % steps);
    const int last = std::min(steps - 1, first + static_cast<int>(rng() % 4));
    if (rng() % 2 == 0) {
      items.push_back(Item(first, last, 8 * (1 + static_cast<int64_t>(rng() % 2)), 8));
    } else {
      items.push_back(Item(first, last, 1 + 2 * static_cast<int64_t>(rng() % 6), 1));
    }
  }
  return Problem(items);
}

OffsetSolution NoIncumbent() { return OffsetSolution{}; }

void ExpectValid(const OffsetProblem& problem, const OffsetSolution& solution) {
  ASSERT_TRUE(CheckOffsetSolution(problem, solution.offsets).ok())
      << CheckOffsetSolution(problem, solution.offsets);
  int64_t height = 0;
  for (size_t i = 0; i < problem.items.size(); ++i) {
    height = std::max(height, solution.offsets[i] + problem.items[i].bytes);
  }
  EXPECT_EQ(solution.height, height);
  EXPECT_GE(solution.height, OffsetLowerBound(problem));
}

ExactOffsetsOptions WithLimit(double seconds) {
  ExactOffsetsOptions options;
  options.time_limit_seconds = seconds;
  return options;
}

// PlaceExact from `incumbent` must give a valid plan at the exhaustive optimum, proven; returns
// that optimum.
int64_t ExpectProvenOptimum(const OffsetProblem& problem, const OffsetSolution& incumbent) {
  const int64_t optimum = OptimumByOrders(problem);
  absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, incumbent, WithLimit(10));
  EXPECT_TRUE(exact.ok()) << exact.status();
  if (!exact.ok()) return optimum;
  ExpectValid(problem, *exact);
  EXPECT_EQ(exact->height, optimum);
  EXPECT_TRUE(exact->proven_optimal);
  return optimum;
}

TEST(ExactOffsetsTest, MatchesExhaustiveOrderSearchOnSmallProblems) {
  int above_lower_bound = 0;
  for (uint32_t seed = 1; seed <= 320; ++seed) {
    SCOPED_TRACE(seed);
    const int n = 1 + static_cast<int>(seed % 7);
    const OffsetProblem problem = RandomProblem(n, 2 + static_cast<int>(seed % 5), 6, seed);
    // Half start from nothing (items stacked), half from the best-fit portfolio.
    OffsetSolution incumbent;
    if (seed % 2 == 0) {
      absl::StatusOr<OffsetSolution> start = PlanBestFit(problem);
      ASSERT_TRUE(start.ok()) << start.status();
      incumbent = *start;
    }
    if (ExpectProvenOptimum(problem, incumbent) > OffsetLowerBound(problem)) {
      ++above_lower_bound;
    }
  }
  // Small random problems almost always reach the bound (alignment makes the exceptions);
  // OptimaAboveTheLowerBound covers the others.
  EXPECT_GE(above_lower_bound, 1);
}

TEST(ExactOffsetsTest, MatchesGridEnumerationOnTinyProblems) {
  for (uint32_t seed = 1000; seed < 1100; ++seed) {
    SCOPED_TRACE(seed);
    const int n = 2 + static_cast<int>(seed % 4);
    const OffsetProblem problem = RandomProblem(n, 3, 3, seed);
    absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, NoIncumbent(), WithLimit(10));
    ASSERT_TRUE(exact.ok()) << exact.status();
    ExpectValid(problem, *exact);
    const int64_t optimum = OptimumByGrid(problem);
    EXPECT_EQ(optimum, OptimumByOrders(problem));  // the two oracles agree
    EXPECT_EQ(exact->height, optimum);
    EXPECT_TRUE(exact->proven_optimal);
  }
}

// MiniMalloc CSV -> OffsetProblem with steps compressed to the sorted distinct lifetime ends.
absl::StatusOr<OffsetProblem> LoadTrace(const std::string& file) {
  const std::string path = testing::SourcePath("../shared/corpus/traces/" + file);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<graph::UsageRecord>> records =
      graph::ParseMiniMallocCsv(text.str(), path);
  if (!records.ok()) return records.status();
  std::vector<int64_t> steps;
  for (const graph::UsageRecord& r : *records) {
    steps.push_back(r.first_step);
    steps.push_back(r.last_step);
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  auto index = [&](int64_t t) {
    return static_cast<int>(std::lower_bound(steps.begin(), steps.end(), t) - steps.begin());
  };
  std::vector<OffsetItem> items;
  for (const graph::UsageRecord& r : *records) {
    items.push_back(Item(index(r.first_step), index(r.last_step), r.bytes));
  }
  return Problem(items);
}

TEST(ExactOffsetsTest, PaperToyReachesItsLowerBound) {
  absl::StatusOr<OffsetProblem> problem = LoadTrace("paper_toy.csv");
  if (problem.status().code() == absl::StatusCode::kNotFound) GTEST_SKIP() << problem.status();
  ASSERT_TRUE(problem.ok()) << problem.status();
  ASSERT_EQ(problem->items.size(), 8u);
  EXPECT_EQ(OffsetLowerBound(*problem), 124);
  absl::StatusOr<OffsetSolution> exact = PlaceExact(*problem, NoIncumbent(), WithLimit(10));
  ASSERT_TRUE(exact.ok()) << exact.status();
  ExpectValid(*problem, *exact);
  EXPECT_EQ(exact->height, 124);
  EXPECT_TRUE(exact->proven_optimal);
}

TEST(ExactOffsetsTest, MemongerDpCounterexampleGetsSixteen) {
  const OffsetProblem problem =
      Problem({Item(0, 1, 7), Item(1, 3, 5), Item(2, 3, 5), Item(3, 5, 6), Item(4, 5, 5)});
  absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, NoIncumbent(), WithLimit(10));
  ASSERT_TRUE(exact.ok()) << exact.status();
  ExpectValid(problem, *exact);
  EXPECT_EQ(exact->height, 16);
  EXPECT_TRUE(exact->proven_optimal);
}

struct GapCase {
  std::string label;
  std::vector<OffsetItem> items;
  int64_t lower_bound;
  int64_t optimum;
};

void PrintTo(const GapCase& c, std::ostream* os) { *os << c.label; }

std::vector<GapCase> GapCases() {
  return {GapCase{"four_items",
                {Item(5, 5, 4, 4), Item(1, 4, 2, 2), Item(2, 3, 4, 4), Item(0, 1, 5, 1)},
                /*lower_bound=*/7, /*optimum=*/8},
        GapCase{"aligned_chain",
                {Item(0, 2, 4, 4), Item(1, 3, 6, 2), Item(3, 4, 3, 1), Item(4, 4, 8, 2)},
                /*lower_bound=*/11, /*optimum=*/12},
        GapCase{"unaligned_below_aligned",
                {Item(1, 3, 5, 1), Item(3, 5, 2, 1), Item(4, 5, 12, 4), Item(0, 1, 8, 4)},
                /*lower_bound=*/14, /*optimum=*/15},
        GapCase{"two_above",
                {Item(4, 5, 2, 2), Item(0, 0, 2, 2), Item(1, 4, 2, 1), Item(0, 3, 0, 2),
                 Item(3, 3, 16, 4), Item(5, 5, 16, 4)},
                /*lower_bound=*/18, /*optimum=*/20},
        GapCase{"eight_aligned",
                {Item(2, 3, 1, 1), Item(3, 3, 8, 8), Item(0, 2, 6, 1), Item(2, 3, 9, 1),
                 Item(0, 0, 16, 8)},
                /*lower_bound=*/22, /*optimum=*/24},
        GapCase{"seven_items",
                {Item(0, 1, 16, 8), Item(0, 2, 3, 1), Item(2, 3, 8, 1), Item(0, 0, 8, 8),
                 Item(1, 3, 2, 1), Item(3, 3, 8, 8), Item(2, 3, 8, 8)},
                /*lower_bound=*/27, /*optimum=*/29}};
}

class ExactOffsetsGapTest : public ::testing::TestWithParam<GapCase> {};

// Problems whose optimum lies above the lower bound (found by a random search; alignment
// leaves holes): the lower bound probe fails, the search above it must prove the optimum.
TEST_P(ExactOffsetsGapTest, ProvesTheOptimumAboveTheBound) {
  const GapCase& c = GetParam();
  const OffsetProblem problem = Problem(c.items);
  EXPECT_EQ(OffsetLowerBound(problem), c.lower_bound);
  EXPECT_EQ(OptimumByGrid(problem), c.optimum);
  EXPECT_EQ(OptimumByOrders(problem), c.optimum);
  absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, NoIncumbent(), WithLimit(10));
  ASSERT_TRUE(exact.ok()) << exact.status();
  ExpectValid(problem, *exact);
  EXPECT_EQ(exact->height, c.optimum);
  EXPECT_TRUE(exact->proven_optimal);
}

// A lower bound proven by the caller (a window's optimum, peak_window.h): an incumbent at it is
// optimal at once, and the search starts there. One below the most live bytes changes nothing.
TEST_P(ExactOffsetsGapTest, StartsFromAProvenLowerBound) {
  const GapCase& c = GetParam();
  const OffsetProblem problem = Problem(c.items);
  ExactOffsetsOptions options = WithLimit(10);
  options.proven_lower_bound = c.optimum;
  absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, NoIncumbent(), options);
  ASSERT_TRUE(exact.ok()) << exact.status();
  ExpectValid(problem, *exact);
  EXPECT_EQ(exact->height, c.optimum);
  EXPECT_TRUE(exact->proven_optimal);
  // Given the optimal plan and the bound, it returns that plan, proven, without searching.
  options.time_limit_seconds = 0;
  absl::StatusOr<OffsetSolution> again = PlaceExact(problem, *exact, options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->offsets, exact->offsets);
  EXPECT_TRUE(again->proven_optimal);
  options.proven_lower_bound = c.lower_bound - 1;
  options.time_limit_seconds = 10;
  absl::StatusOr<OffsetSolution> loose = PlaceExact(problem, NoIncumbent(), options);
  ASSERT_TRUE(loose.ok()) << loose.status();
  EXPECT_EQ(loose->height, c.optimum);
  EXPECT_TRUE(loose->proven_optimal);
}

// A library caller's limit of 10^10 s or infinity is as good as none: it once overflowed the
// clock into the past, and the search returned the stacked incumbent, unproven.
TEST_P(ExactOffsetsGapTest, HugeTimeLimitsStillSearch) {
  const GapCase& c = GetParam();
  const OffsetProblem problem = Problem(c.items);
  for (double seconds : {1e10, std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(seconds);
    absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, NoIncumbent(), WithLimit(seconds));
    ASSERT_TRUE(exact.ok()) << exact.status();
    EXPECT_EQ(exact->height, c.optimum);
    EXPECT_TRUE(exact->proven_optimal);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ExactOffsetsGapTest, ::testing::ValuesIn(GapCases()),
    [](const ::testing::TestParamInfo<GapCase>& info) { return info.param.label; });

// The gap cases with every size multiplied by k and every alignment by a (a divides k), so that
// the sizes share factors the alignments may lack. With k = 12, a = 4 the sizes' gcd is 12 and
// the alignments are 4 and 32: offsets move in steps of 4 (an item aligned to 32 above one of
// 12 bytes starts at 32), and the search steps its heights by 4. Each answer must still be the
// optimum, proven. (A search stepping by 12 here passes too: its probes happen to find the
// lowest plans. The granule's argument is in exact_offsets.cc.)
TEST(ExactOffsetsTest, HeightsStepByTheGranuleOfSizesAndAlignments) {
  struct Scale {
    int64_t size_factor;
    int64_t alignment_factor;
  };
  int above_lower_bound = 0;
  for (const GapCase& c : GapCases()) {
    for (Scale scale : {Scale{12, 4}, Scale{6, 2}, Scale{3, 1}, Scale{4, 4}, Scale{10, 1}}) {
      SCOPED_TRACE(c.label + " x" + std::to_string(scale.size_factor) + " align x" +
                   std::to_string(scale.alignment_factor));
      std::vector<OffsetItem> items = c.items;
      for (OffsetItem& item : items) {
        item.bytes *= scale.size_factor;
        item.alignment *= scale.alignment_factor;
      }
      const OffsetProblem problem = Problem(items);
      if (ExpectProvenOptimum(problem, NoIncumbent()) > OffsetLowerBound(problem)) {
        ++above_lower_bound;
      }
    }
  }
  EXPECT_GE(above_lower_bound, 8);  // the gaps are where a wrong step would show
}

// Preorders side by side (on every probe: no node threshold) give the plan and the proof of one
// thread: small problems of every kind, a few with their optimum above the lower bound.
TEST(ExactOffsetsTest, ThreadsGiveTheSerialPlanAndProof) {
  std::vector<OffsetProblem> problems;
  for (const GapCase& c : GapCases()) problems.push_back(Problem(c.items));
  for (uint32_t seed = 1; seed <= 120; ++seed) {
    const int n = 5 + static_cast<int>(seed % 20);
    problems.push_back(MixedAlignmentProblem(n, 4 + static_cast<int>(seed % 5), seed));
  }
  int above_lower_bound = 0;
  for (size_t k = 0; k < problems.size(); ++k) {
    SCOPED_TRACE(k);
    const OffsetProblem& problem = problems[k];
    absl::StatusOr<OffsetSolution> serial = PlaceExact(problem, NoIncumbent(), WithLimit(30));
    ASSERT_TRUE(serial.ok()) << serial.status();
    ASSERT_TRUE(serial->proven_optimal);  // not cut by the clock, so the answer is determined
    if (serial->height > OffsetLowerBound(problem)) ++above_lower_bound;
    for (int threads : {2, 3, 5}) {
      ExactOffsetsOptions options = WithLimit(30);
      options.threads = threads;
      options.min_nodes_side_by_side = 1;
      absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, NoIncumbent(), options);
      ASSERT_TRUE(exact.ok()) << exact.status();
      ExpectValid(problem, *exact);
      EXPECT_EQ(exact->offsets, serial->offsets) << threads << " threads";
      EXPECT_EQ(exact->proven_optimal, serial->proven_optimal) << threads << " threads";
    }
  }
  EXPECT_GE(above_lower_bound, 7);
}

TEST(ExactOffsetsTest, AlignmentIsRespected) {
  // A 1-byte item below forces the 64-aligned item up to 64, not 1.
  const OffsetProblem problem = Problem({Item(0, 1, 1), Item(1, 2, 64, 64), Item(2, 3, 1)});
  absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, NoIncumbent(), WithLimit(10));
  ASSERT_TRUE(exact.ok()) << exact.status();
  ExpectValid(problem, *exact);
  EXPECT_EQ(exact->height, OptimumByOrders(problem));
  for (size_t i = 0; i < problem.items.size(); ++i) {
    EXPECT_EQ(exact->offsets[i] % problem.items[i].alignment, 0) << i;
  }
}

TEST(ExactOffsetsTest, EmptyAndZeroByteProblems) {
  absl::StatusOr<OffsetSolution> empty = PlaceExact(OffsetProblem{}, NoIncumbent(), {});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->height, 0);
  EXPECT_TRUE(empty->proven_optimal);

  // Zero-byte items go to offset 0, whatever the incumbent said.
  const OffsetProblem problem = Problem({Item(0, 2, 0), Item(0, 2, 8), Item(1, 1, 0, 4)});
  OffsetSolution incumbent;
  incumbent.offsets = {100, 0, 400};
  absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, incumbent, {});
  ASSERT_TRUE(exact.ok()) << exact.status();
  ExpectValid(problem, *exact);
  EXPECT_EQ(exact->offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(exact->height, 8);
  EXPECT_TRUE(exact->proven_optimal);
}

TEST(ExactOffsetsTest, IncumbentAtTheLowerBoundReturnsAtOnce) {
  const OffsetProblem problem = Problem({Item(0, 1, 4), Item(1, 2, 4), Item(2, 3, 4)});
  OffsetSolution incumbent;
  incumbent.offsets = {0, 4, 0};
  ExactOffsetsOptions options;
  options.time_limit_seconds = 0;  // no search at all
  absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, incumbent, options);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->offsets, incumbent.offsets);
  EXPECT_EQ(exact->height, 8);
  EXPECT_TRUE(exact->proven_optimal);
}

// Cuts the rectangle [t0, t1) x [o0, o1) (steps x bytes) in two, recursively; the pieces
// become items. Such a problem fits its lower bound exactly (the rectangle's height), but
// finding the tiling again can take the search a long time.
void Cut(std::mt19937& rng, int t0, int t1, int64_t o0, int64_t o1, int depth,
         std::vector<OffsetItem>& items) {
  const bool can_cut_time = t1 - t0 >= 2;
  const bool can_cut_bytes = o1 - o0 >= 2;
  if (depth == 0 || (!can_cut_time && !can_cut_bytes) || rng() % 8 == 0) {
    items.push_back(Item(t0, t1 - 1, o1 - o0));
    return;
  }
  if (can_cut_time && (!can_cut_bytes || rng() % 2 == 0)) {
    const int t = t0 + 1 + static_cast<int>(rng() % (t1 - t0 - 1));
    Cut(rng, t0, t, o0, o1, depth - 1, items);
    Cut(rng, t, t1, o0, o1, depth - 1, items);
  } else {
    const int64_t o = o0 + 1 + static_cast<int64_t>(rng() % (o1 - o0 - 1));
    Cut(rng, t0, t1, o0, o, depth - 1, items);
    Cut(rng, t0, t1, o, o1, depth - 1, items);
  }
}

OffsetProblem Guillotine(int steps, int64_t height, int depth, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<OffsetItem> items;
  Cut(rng, 0, steps, 0, height, depth, items);
  return Problem(items);
}

TEST(ExactOffsetsTest, GuillotineCutsReachTheirLowerBound) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem problem = Guillotine(32, 256, 7, seed);
    absl::StatusOr<OffsetSolution> start = PlanBestFit(problem);
    ASSERT_TRUE(start.ok()) << start.status();
    absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, *start, WithLimit(30));
    ASSERT_TRUE(exact.ok()) << exact.status();
    ExpectValid(problem, *exact);
    EXPECT_EQ(exact->height, 256);
    EXPECT_TRUE(exact->proven_optimal);
  }
}

// 600 pieces: the search does not settle it within a few seconds.
OffsetProblem HardProblem() { return Guillotine(64, 4096, 12, 1); }

TEST(ExactOffsetsTest, TinyTimeLimitReturnsAValidPlanNoWorseThanTheIncumbent) {
  const OffsetProblem problem = HardProblem();
  absl::StatusOr<OffsetSolution> start = PlanBestFit(problem);
  ASSERT_TRUE(start.ok()) << start.status();
  for (double limit : {0.0, 0.001, 0.05}) {
    SCOPED_TRACE(limit);
    absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, *start, WithLimit(limit));
    ASSERT_TRUE(exact.ok()) << exact.status();
    ExpectValid(problem, *exact);
    EXPECT_LE(exact->height, start->height);
    if (exact->proven_optimal) {
      EXPECT_EQ(exact->height, OffsetLowerBound(problem));
    }
  }
  // With no time at all the incumbent comes back unless it already met the bound.
  absl::StatusOr<OffsetSolution> none = PlaceExact(problem, *start, WithLimit(0));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->height, start->height);
  EXPECT_EQ(none->proven_optimal, start->height == OffsetLowerBound(problem));
}

TEST(ExactOffsetsTest, StackedIncumbentIsImprovedAndResultsAreDeterministic) {
  const OffsetProblem problem = RandomProblem(60, 40, 12, 5);
  absl::StatusOr<OffsetSolution> first = PlaceExact(problem, NoIncumbent(), WithLimit(10));
  absl::StatusOr<OffsetSolution> second = PlaceExact(problem, NoIncumbent(), WithLimit(10));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectValid(problem, *first);
  ASSERT_TRUE(first->proven_optimal);  // small enough to finish well within the limit
  EXPECT_EQ(first->offsets, second->offsets);
  EXPECT_EQ(first->height, second->height);
}

TEST(ExactOffsetsTest, RandomMediumProblemsAreValidAndNeverWorse) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem problem = RandomProblem(20 + static_cast<int>(seed), 25, 10, seed);
    absl::StatusOr<OffsetSolution> start = PlanBestFit(problem);
    ASSERT_TRUE(start.ok()) << start.status();
    absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, *start, WithLimit(0.2));
    ASSERT_TRUE(exact.ok()) << exact.status();
    ExpectValid(problem, *exact);
    EXPECT_LE(exact->height, start->height);
  }
}

TEST(ExactOffsetsTest, ProgressIsReportedAtMostAboutOncePerSecond) {
  const OffsetProblem problem = HardProblem();
  absl::StatusOr<OffsetSolution> start = PlanBestFit(problem);
  ASSERT_TRUE(start.ok()) << start.status();
  std::vector<ExactProgress> reports;
  ExactOffsetsOptions options;
  options.time_limit_seconds = 1.5;
  options.progress = [&](const ExactProgress& p) { reports.push_back(p); };
  absl::StatusOr<OffsetSolution> exact = PlaceExact(problem, *start, options);
  ASSERT_TRUE(exact.ok()) << exact.status();
  ExpectValid(problem, *exact);
  EXPECT_GE(reports.size(), 1u);
  EXPECT_LE(reports.size(), 2u);
  for (const ExactProgress& p : reports) {
    EXPECT_GE(p.seconds, 0.9);
    EXPECT_LE(p.lower_bound, p.probing_height);
    EXPECT_LE(p.probing_height, p.best_height);
    EXPECT_GE(p.lower_bound, OffsetLowerBound(problem));
    EXPECT_GT(p.nodes, 0);
  }
}

struct BadInputCase {
  std::string label;
  OffsetProblem problem;
  std::vector<int64_t> incumbent;  // empty: none
  double time_limit;
  std::string expected;
};

void PrintTo(const BadInputCase& c, std::ostream* os) { *os << c.label; }

class ExactOffsetsBadInputTest : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(ExactOffsetsBadInputTest, IsInvalidArgument) {
  const BadInputCase& c = GetParam();
  OffsetSolution incumbent;
  incumbent.offsets = c.incumbent;
  absl::StatusOr<OffsetSolution> exact =
      PlaceExact(c.problem, incumbent, WithLimit(c.time_limit));
  ASSERT_FALSE(exact.ok());
  EXPECT_EQ(exact.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(exact.status().message()), HasSubstr(c.expected));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ExactOffsetsBadInputTest,
    ::testing::Values(
        BadInputCase{"last_before_first", Problem({Item(3, 2, 4)}), {}, 1, "lifetime [3, 2]"},
        BadInputCase{"negative_bytes", Problem({Item(0, 1, -4)}), {}, 1, "negative bytes"},
        BadInputCase{"alignment_not_power_of_two", Problem({Item(0, 1, 6, 3)}), {}, 1,
                     "power of two"},
        BadInputCase{"alignment_zero", Problem({Item(0, 1, 0, 0)}), {}, 1, "power of two"},
        BadInputCase{"bytes_not_multiple_of_alignment", Problem({Item(0, 1, 6, 4)}), {}, 1,
                     "multiple of its alignment"},
        BadInputCase{"incumbent_wrong_size", Problem({Item(0, 1, 4), Item(1, 2, 4)}), {0}, 1,
                     "1 offsets for 2 items"},
        BadInputCase{"incumbent_overlaps", Problem({Item(0, 1, 4), Item(1, 2, 4)}), {0, 2}, 1,
                     "invalid incumbent"},
        BadInputCase{"negative_time_limit", Problem({Item(0, 1, 4)}), {}, -1,
                     "negative time limit"}),
    [](const ::testing::TestParamInfo<BadInputCase>& info) { return info.param.label; });

}  // namespace
}  // namespace memonger
