// Every planner on fixed-seed random graphs, in both execution models: the plan verifies, and
// lower bound <= arena <= naive. Planners that do not support an execution model must say so
// with InvalidArgument rather than return an unsafe plan.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/random_graphs.h"

namespace memonger {
namespace {

constexpr int kSeeds = 500;

struct PlannerCase {
  PlannerKind planner;
  ExecutionModel execution;
};

std::string CaseName(const ::testing::TestParamInfo<PlannerCase>& info) {
  std::string name = absl::StrCat(PlannerName(info.param.planner), "_",
                                  ExecutionName(info.param.execution));
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

// memonger's optimize_interference and our exact-sharing reason about serial lifetimes only.
bool RefusesParallel(PlannerKind planner) {
  return planner == PlannerKind::kMemongerGreedy || planner == PlannerKind::kMemongerDp ||
         planner == PlannerKind::kExactSharing;
}

class PlannerPropertyTest : public ::testing::TestWithParam<PlannerCase> {};

TEST_P(PlannerPropertyTest, PlansVerifyAndLieBetweenTheBounds) {
  const PlannerCase c = GetParam();
  int planned = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions graph_options;
    // memonger's DP is exponential in the number of overlapping values: smaller nets for it.
    graph_options.num_ops =
        3 + static_cast<int>(seed % (c.planner == PlannerKind::kMemongerDp ? 17 : 37));
    graph_options.num_inputs = 1 + static_cast<int>(seed % 3);
    graph_options.num_params = static_cast<int>(seed % 3);
    graph_options.inplace_probability = seed % 4 == 0 ? 0.4 : 0.15;
    graph_options.control_input_probability = 0.05;
    graph_options.view_probability = seed % 5 == 0 ? 0.2 : 0.0;
    graph_options.num_devices = seed % 6 == 0 ? 3 : 1;
    const graph::Graph g = testing::RandomGraph(seed, graph_options);

    PlanOptions options;
    options.planner = c.planner;
    options.execution = c.execution;
    options.order = seed % 3 == 0   ? OrderKind::kGiven
                    : seed % 3 == 1 ? OrderKind::kTopological
                                    : OrderKind::kLongestPath;
    const int64_t alignments[] = {1, 64, 256};
    options.alignment = alignments[seed % 3 == 0 ? (seed / 3) % 3 : seed % 3];
    options.views = seed % 5 == 0;
    options.plan_static = seed % 7 == 0;
    options.time_limit_seconds = c.planner == PlannerKind::kMemongerDp ? 1 : 5;

    absl::StatusOr<Plan> plan = PlanMemory(g, options);
    if (c.execution == ExecutionModel::kParallel && RefusesParallel(c.planner)) {
      ASSERT_FALSE(plan.ok());
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
      continue;
    }
    if (c.planner == PlannerKind::kMemongerDp && !plan.ok() &&
        plan.status().code() == absl::StatusCode::kDeadlineExceeded) {
      continue;  // memonger's DP is exponential; its budget guards it
    }
    ASSERT_TRUE(plan.ok()) << plan.status();
    ++planned;
    const absl::Status verified = VerifyPlan(g, *plan);
    ASSERT_TRUE(verified.ok()) << verified;
    EXPECT_EQ(plan->planner, PlannerName(c.planner));
    EXPECT_EQ(plan->order, options.order);
    EXPECT_EQ(plan->execution, options.execution);
    EXPECT_LE(plan->lower_bound_bytes, plan->arena_bytes);
    EXPECT_LE(plan->arena_bytes, plan->naive_bytes);
    EXPECT_EQ(plan->arena_bytes % plan->alignment, 0);
    EXPECT_GE(plan->planning_seconds, 0);
    for (graph::ValueId v = 0; v < g.num_values(); ++v) {
      if (plan->buffer_of_value[v] >= 0) {
        EXPECT_EQ(plan->offset_of_value[v] % options.alignment, 0);
      }
    }
    if (c.planner == PlannerKind::kNone) {
      EXPECT_EQ(plan->arena_bytes, plan->naive_bytes);
    }
    if (seed % 25 == 0) {  // deterministic
      absl::StatusOr<Plan> again = PlanMemory(g, options);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(again->offset_of_value, plan->offset_of_value);
      EXPECT_EQ(again->arena_bytes, plan->arena_bytes);
    }
  }
  if (!(c.execution == ExecutionModel::kParallel && RefusesParallel(c.planner))) {
    EXPECT_GT(planned, kSeeds * 9 / 10);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllPlanners, PlannerPropertyTest,
    ::testing::Values(PlannerCase{PlannerKind::kNone, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kNone, ExecutionModel::kParallel},
                      PlannerCase{PlannerKind::kMemongerDag, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kMemongerDag, ExecutionModel::kParallel},
                      PlannerCase{PlannerKind::kMemongerGreedy, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kMemongerGreedy, ExecutionModel::kParallel},
                      PlannerCase{PlannerKind::kMemongerDp, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kMemongerDp, ExecutionModel::kParallel},
                      PlannerCase{PlannerKind::kExactSharing, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kExactSharing, ExecutionModel::kParallel}),
    CaseName);

}  // namespace
}  // namespace memonger
