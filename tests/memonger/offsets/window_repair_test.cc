#include "memonger/offsets/window_repair.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/offset_problem.h"
#include "tests/offset_support.h"

namespace memonger {
namespace {

using ::memonger::testing::Item;

// A random problem (aligned sizes, some zero-byte items) and a valid but poor placement of it:
// greedy lowest-offset in a random order.
struct Case {
  OffsetProblem problem;
  OffsetSolution solution;
};

Case RandomCase(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Case c;
  c.problem.num_steps = 1 + static_cast<int>(rng() % 40);
  const int n = 1 + static_cast<int>(rng() % 60);
  for (int i = 0; i < n; ++i) {
    const int first = static_cast<int>(rng() % c.problem.num_steps);
    const int last = first + static_cast<int>(rng() % std::min(c.problem.num_steps - first, 8));
    const int64_t alignment = int64_t{1} << (rng() % 3);
    const int64_t bytes = rng() % 10 == 0 ? 0 : alignment * static_cast<int64_t>(1 + rng() % 8);
    c.problem.items.push_back(Item(first, last, bytes, alignment));
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  GreedyPlacer placer(c.problem);
  c.solution = placer.Place(order, FitRule::kLowestOffset);
  return c;
}

TEST(OffsetWindowRepairTest, RandomPlacementsStayValidAndNeverRise) {
  int improved = 0;
  int reached_bound = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE(seed);
    const Case c = RandomCase(seed);
    ASSERT_TRUE(CheckOffsetSolution(c.problem, c.solution.offsets).ok());
    RepairOptions options;
    options.seed = seed;
    options.max_window_items = 2 + static_cast<int>(seed % 50);  // small windows too
    absl::StatusOr<RepairResult> r = RepairWindows(c.problem, c.solution, options);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(CheckOffsetSolution(c.problem, r->solution.offsets).ok());
    int64_t height = 0;
    for (size_t i = 0; i < c.problem.items.size(); ++i) {
      if (c.problem.items[i].bytes > 0) {
        height = std::max(height, r->solution.offsets[i] + c.problem.items[i].bytes);
      }
    }
    EXPECT_EQ(r->solution.height, height);
    EXPECT_LE(r->solution.height, c.solution.height);
    const int64_t lower_bound = OffsetLowerBound(c.problem);
    EXPECT_GE(r->solution.height, lower_bound);
    EXPECT_EQ(r->solution.proven_optimal, r->solution.height == lower_bound);
    EXPECT_LE(r->windows_repaired, r->windows_tried);
    improved += r->solution.height < c.solution.height;
    reached_bound += c.solution.height > lower_bound && r->solution.height == lower_bound;
  }
  // Not a no-op: random orders leave plenty to repair.
  EXPECT_GT(improved, 100);
  EXPECT_GT(reached_bound, 50);
}

TEST(OffsetWindowRepairTest, Deterministic) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const Case c = RandomCase(seed);
    absl::StatusOr<RepairResult> a = RepairWindows(c.problem, c.solution);
    absl::StatusOr<RepairResult> b = RepairWindows(c.problem, c.solution);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->solution.offsets, b->solution.offsets);
  }
}

// Three items in a row, each meeting the next: stacked, the third sits on the second at 8;
// it shares no step with the first, so offset 0 is free for it.
//   step      0    1    2    3
//   8..12               [z.......]
//   4..8           [y.......]
//   0..4      [x.......]
TEST(OffsetWindowRepairTest, MovesAStackedItemIntoTheHoleItsWindowHas) {
  OffsetProblem p;
  p.num_steps = 4;
  p.items = {Item(0, 1, 4), Item(1, 2, 4), Item(2, 3, 4)};
  OffsetSolution s;
  s.offsets = {0, 4, 8};
  s.height = 12;
  absl::StatusOr<RepairResult> r = RepairWindows(p, s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.offsets, (std::vector<int64_t>{0, 4, 0}));
  EXPECT_EQ(r->solution.height, 8);
  EXPECT_TRUE(r->solution.proven_optimal);
  EXPECT_EQ(r->windows_repaired, 1);
}

TEST(OffsetWindowRepairTest, APassedDeadlineKeepsThePlacement) {
  const Case c = RandomCase(7);
  RepairOptions options;
  options.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  absl::StatusOr<RepairResult> r = RepairWindows(c.problem, c.solution, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->solution.offsets, c.solution.offsets);
  EXPECT_EQ(r->windows_tried, 0);
}

TEST(OffsetWindowRepairTest, RefusesAnInvalidPlacement) {
  OffsetProblem p;
  p.num_steps = 2;
  p.items = {Item(0, 1, 4), Item(1, 1, 4)};
  OffsetSolution overlapping;
  overlapping.offsets = {0, 2};
  EXPECT_EQ(RepairWindows(p, overlapping).status().code(), absl::StatusCode::kInvalidArgument);
  OffsetSolution short_one;
  short_one.offsets = {0};
  EXPECT_EQ(RepairWindows(p, short_one).status().code(), absl::StatusCode::kInvalidArgument);
  p.items[0].last_step = 5;  // outside num_steps
  OffsetSolution fine;
  fine.offsets = {0, 4};
  EXPECT_EQ(RepairWindows(p, fine).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memonger
