#include "workloads/workload_guillotine.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/offsets/offset_problem.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "workloads/workloads.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

GuillotineWorkload Workload(int64_t records, uint64_t seed, int64_t steps = 50,
                            int64_t height = 40, int64_t unit = 4) {
  GuillotineWorkload w;
  w.records = records;
  w.seed = seed;
  w.steps = steps;
  w.height = height;
  w.unit = unit;
  return w;
}

// The pieces tile the rectangle: every step has exactly height units live, the construction's
// offsets are a valid placement, and so the optimum is the lower bound.
TEST(GuillotineWorkloadTest, PiecesTileTheRectangleAndTheirOffsetsAreOptimal) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    const GuillotineWorkload w = Workload(1 + static_cast<int64_t>(seed * 7 % 300), seed);
    const GuillotineInstance g = MakeGuillotineInstance(w);
    ASSERT_EQ(static_cast<int64_t>(g.records.size()), w.records);
    EXPECT_EQ(g.optimum, w.height * w.unit);
    int64_t area = 0;
    for (const UsageRecord& r : g.records) {
      ASSERT_GE(r.first_step, 0);
      ASSERT_LT(r.last_step, w.steps);
      ASSERT_LE(r.first_step, r.last_step);
      ASSERT_GT(r.bytes, 0);
      area += (r.last_step - r.first_step + 1) * r.bytes;
    }
    EXPECT_EQ(area, w.steps * w.height * w.unit);
    absl::StatusOr<OffsetProblem> problem = OffsetProblemFromRecords(g.records, /*alignment=*/1);
    ASSERT_TRUE(problem.ok()) << problem.status();
    EXPECT_EQ(OffsetLowerBound(*problem), g.optimum);
    std::vector<int64_t> offsets;
    for (const UsageRecord& r : g.records) offsets.push_back(r.offset);
    EXPECT_TRUE(CheckOffsetSolution(*problem, offsets).ok());
  }
}

TEST(GuillotineWorkloadTest, DeterministicPerSeed) {
  const GuillotineInstance a = MakeGuillotineInstance(Workload(200, 3));
  const GuillotineInstance b = MakeGuillotineInstance(Workload(200, 3));
  const GuillotineInstance c = MakeGuillotineInstance(Workload(200, 4));
  ASSERT_EQ(a.records.size(), b.records.size());
  bool differs = false;
  for (size_t k = 0; k < a.records.size(); ++k) {
    EXPECT_EQ(a.records[k].offset, b.records[k].offset);
    EXPECT_EQ(a.records[k].first_step, b.records[k].first_step);
    EXPECT_EQ(a.records[k].bytes, b.records[k].bytes);
    differs = differs || a.records[k].first_step != c.records[k].first_step ||
              a.records[k].bytes != c.records[k].bytes;
  }
  EXPECT_TRUE(differs);
}

// A single step or a single unit of height: every piece is one cut of the other axis.
TEST(GuillotineWorkloadTest, DegenerateRectangles) {
  const GuillotineInstance one_step = MakeGuillotineInstance(Workload(10, 1, 1, 10, 1));
  for (const UsageRecord& r : one_step.records) EXPECT_EQ(r.bytes, 1);
  const GuillotineInstance one_unit = MakeGuillotineInstance(Workload(10, 1, 10, 1, 1));
  for (const UsageRecord& r : one_unit.records) EXPECT_EQ(r.first_step, r.last_step);
}

// Small instances: the planners must find the known optimum, and the plan verifies.
TEST(GuillotineWorkloadTest, AutoPlansSmallInstancesAtTheirOptimum) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(seed);
    absl::StatusOr<WorkloadSpec> spec =
        ParseWorkloadSpec("guillotine:records=60,steps=200,height=64,unit=256,seed=" +
                          std::to_string(seed));
    ASSERT_TRUE(spec.ok());
    absl::StatusOr<Graph> g = BuildWorkload(*spec);
    ASSERT_TRUE(g.ok()) << g.status();
    PlanOptions options;
    options.time_limit_seconds = 10;
    options.planner = PlannerKind::kAuto;
    absl::StatusOr<Plan> plan = PlanMemory(*g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(*g, *plan).ok());
    EXPECT_EQ(plan->arena_bytes, 64 * 256);
    EXPECT_TRUE(plan->proven_optimal);
  }
}

TEST(GuillotineWorkloadTest, BadSpecsAreErrors) {
  auto error = [](const std::string& text) {
    absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec(text);
    EXPECT_TRUE(spec.ok());
    return std::string(ParseGuillotineWorkload(*spec).status().message());
  };
  EXPECT_THAT(error("guillotine:records=0"), HasSubstr("records"));
  EXPECT_THAT(error("guillotine:unit=3"), HasSubstr("not a power of two"));
  EXPECT_THAT(error("guillotine:records=11,steps=2,height=5"), HasSubstr("more than steps x"));
  EXPECT_THAT(error("guillotine:depth=3"), HasSubstr("unknown key 'depth'"));
  absl::StatusOr<WorkloadSpec> fine = ParseWorkloadSpec("guillotine:records=10,steps=2,height=5");
  ASSERT_TRUE(fine.ok());
  EXPECT_TRUE(ParseGuillotineWorkload(*fine).ok());
}

}  // namespace
}  // namespace memonger::graph
