// Every sharing planner (the planners that assign values to shared buffers: none, memonger-dag,
// memonger-greedy, memonger-dp, exact-sharing) meets the same properties, checked once here as a
// typed suite rather than copied into each planner's own test: on fixed-seed random graphs the
// plan passes the independent verifier and lower bound <= arena <= naive, in both execution
// models (a planner that reasons about serial lifetimes only refuses a parallel executor with
// InvalidArgument instead of returning an unsafe plan); the same input gives the same plan; and
// a searching planner stops at its time limit with a plan that still verifies.
#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using ::testing::HasSubstr;

// Each planner: its kind, whether it refuses the parallel execution model, and the largest
// random graph its tests use (memonger's DP is exponential in the number of overlapping values).
// kDeterminismOps: the graph size of the determinism check (searches that finish there).
template <PlannerKind kind, bool refuses_parallel, int max_ops = 40, int determinism_ops = 200>
struct SharingPlanner {
  static constexpr PlannerKind kPlanner = kind;
  static constexpr bool kRefusesParallel = refuses_parallel;
  static constexpr int kMaxOps = max_ops;
  static constexpr int kDeterminismOps = determinism_ops;
  static std::string Name() {  // memonger_dag: a valid test name
    std::string name(PlannerName(kind));
    std::replace(name.begin(), name.end(), '-', '_');
    return name;
  }
};
using None = SharingPlanner<PlannerKind::kNone, false>;
using MemongerDag = SharingPlanner<PlannerKind::kMemongerDag, false>;
using MemongerGreedy = SharingPlanner<PlannerKind::kMemongerGreedy, true>;
using MemongerDp = SharingPlanner<PlannerKind::kMemongerDp, true, 20, 20>;
using ExactSharing = SharingPlanner<PlannerKind::kExactSharing, false, 40, 40>;
using MemongerFast = SharingPlanner<PlannerKind::kMemongerFast, true>;

constexpr int kSeeds = 500;

// Random graph `seed` with the options the properties sweep over (in-place ops, views, control
// inputs, several devices), at most `max_ops` ops (exactly `max_ops` when `exact`).
graph::Graph SweepGraph(uint64_t seed, int max_ops, bool exact = false) {
  testing::RandomGraphOptions graph_options;
  graph_options.num_ops =
      exact ? max_ops : 3 + static_cast<int>(seed % static_cast<uint64_t>(max_ops - 3));
  graph_options.num_inputs = 1 + static_cast<int>(seed % 3);
  graph_options.num_params = static_cast<int>(seed % 3);
  graph_options.inplace_probability = seed % 4 == 0 ? 0.4 : 0.15;
  graph_options.control_input_probability = 0.05;
  graph_options.view_probability = seed % 5 == 0 ? 0.2 : 0.0;
  graph_options.num_devices = seed % 6 == 0 ? 3 : 1;
  return testing::RandomGraph(seed, graph_options);
}

// The options swept with the graph: order, alignment, views, static values in the arena.
PlanOptions SweepOptions(uint64_t seed, PlannerKind planner, ExecutionModel execution) {
  PlanOptions options;
  options.planner = planner;
  options.execution = execution;
  options.order = seed % 3 == 0   ? OrderKind::kGiven
                  : seed % 3 == 1 ? OrderKind::kTopological
                                  : OrderKind::kLongestPath;
  const int64_t alignments[] = {1, 64, 256};
  options.alignment = alignments[seed % 3 == 0 ? (seed / 3) % 3 : seed % 3];
  options.liveness.views = seed % 5 == 0;
  options.liveness.plan_static = seed % 7 == 0;
  options.time_limit_seconds = planner == PlannerKind::kMemongerDp ? 1 : 5;
  return options;
}

// The properties every plan of every sharing planner has.
void ExpectSoundPlan(const graph::Graph& g, const PlanOptions& options, const Plan& plan) {
  const absl::Status verified = VerifyPlan(g, plan);
  ASSERT_TRUE(verified.ok()) << verified;
  EXPECT_EQ(plan.planner, PlannerName(options.planner));
  EXPECT_EQ(plan.order, options.order);
  EXPECT_EQ(plan.execution, options.execution);
  EXPECT_LE(plan.lower_bound_bytes, plan.arena_bytes);
  EXPECT_LE(plan.arena_bytes, plan.naive_bytes);
  EXPECT_EQ(plan.arena_bytes % plan.alignment, 0);
  EXPECT_GE(plan.planning_seconds, 0);
  for (graph::ValueId v = 0; v < g.num_values(); ++v) {
    if (plan.buffer_of_value[v] >= 0) {
      EXPECT_EQ(plan.offset_of_value[v] % options.alignment, 0) << g.value(v).DisplayName();
    }
  }
  if (options.planner == PlannerKind::kNone) {
    EXPECT_EQ(plan.arena_bytes, plan.naive_bytes);
  }
}

// memonger's DP is exponential: past its time limit it says DeadlineExceeded, a planner's
// honest "no answer in time", which the properties accept.
bool DpOutOfTime(PlannerKind planner, const absl::StatusOr<Plan>& plan) {
  return planner == PlannerKind::kMemongerDp && !plan.ok() &&
         plan.status().code() == absl::StatusCode::kDeadlineExceeded;
}

template <typename Planner>
class SharingPlannersTest : public ::testing::Test {};
using Planners =
    ::testing::Types<None, MemongerDag, MemongerGreedy, MemongerDp, MemongerFast, ExactSharing>;
TYPED_TEST_SUITE(SharingPlannersTest, Planners, testing::NamedTypes);

TYPED_TEST(SharingPlannersTest, SerialPlansVerifyAndLieBetweenTheBounds) {
  int planned = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE(seed);
    const graph::Graph g = SweepGraph(seed, TypeParam::kMaxOps);
    const PlanOptions options = SweepOptions(seed, TypeParam::kPlanner, ExecutionModel::kSerial);
    absl::StatusOr<Plan> plan = PlanMemory(g, options);
    if (DpOutOfTime(TypeParam::kPlanner, plan)) continue;
    ASSERT_TRUE(plan.ok()) << plan.status();
    ++planned;
    ExpectSoundPlan(g, options, *plan);
  }
  EXPECT_GT(planned, kSeeds * 9 / 10);
}

TYPED_TEST(SharingPlannersTest, ParallelPlansVerifyOrAreRefused) {
  int planned = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE(seed);
    const graph::Graph g = SweepGraph(seed, TypeParam::kMaxOps);
    const PlanOptions options =
        SweepOptions(seed, TypeParam::kPlanner, ExecutionModel::kParallel);
    absl::StatusOr<Plan> plan = PlanMemory(g, options);
    if (TypeParam::kRefusesParallel) {
      ASSERT_FALSE(plan.ok());
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
      // The message names both models: what was asked and what the planner supports.
      EXPECT_THAT(std::string(plan.status().message()), HasSubstr("parallel"));
      EXPECT_THAT(std::string(plan.status().message()), HasSubstr("serial"));
      continue;
    }
    ASSERT_TRUE(plan.ok()) << plan.status();
    ++planned;
    ExpectSoundPlan(g, options, *plan);
  }
  if (!TypeParam::kRefusesParallel) {
    EXPECT_EQ(planned, kSeeds);
  }
}

// The same plan twice, under the swept options (orders, alignments, views, static values in
// the arena, several devices) in both execution models, on graphs of kDeterminismOps ops.
TYPED_TEST(SharingPlannersTest, Deterministic) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    const graph::Graph g = SweepGraph(seed, TypeParam::kDeterminismOps, /*exact=*/true);
    const ExecutionModel execution = seed % 2 == 0 && !TypeParam::kRefusesParallel
                                         ? ExecutionModel::kParallel
                                         : ExecutionModel::kSerial;
    PlanOptions options = SweepOptions(seed, TypeParam::kPlanner, execution);
    options.time_limit_seconds = 30;  // the searches finish: the result must reproduce
    absl::StatusOr<Plan> a = PlanMemory(g, options);
    if (DpOutOfTime(TypeParam::kPlanner, a)) continue;
    ASSERT_TRUE(a.ok()) << a.status();
    if (TypeParam::kPlanner == PlannerKind::kExactSharing) {
      ASSERT_TRUE(a->proven_optimal);  // else the clock, not the input, decided the plan
    }
    absl::StatusOr<Plan> b = PlanMemory(g, options);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->buffer_of_value, b->buffer_of_value);
    EXPECT_EQ(a->offset_of_value, b->offset_of_value);
    EXPECT_EQ(a->arena_bytes, b->arena_bytes);
  }
}

// A graph far beyond what the searches finish in the limit: the planner still answers soon
// after its limit, and what it answers verifies (or, memonger's DP, says DeadlineExceeded).
TYPED_TEST(SharingPlannersTest, TimeLimitIsHonoured) {
  const graph::Graph g = testing::RandomGraph(
      11, {.num_ops = TypeParam::kMaxOps * 10, .num_inputs = 6, .max_op_inputs = 4,
           .max_op_outputs = 4, .multi_output_probability = 0.5});
  PlanOptions options;
  options.planner = TypeParam::kPlanner;
  options.time_limit_seconds = 0.2;
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  if (DpOutOfTime(TypeParam::kPlanner, plan)) {
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr("budget"));
    return;
  }
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectSoundPlan(g, options, *plan);
  // Generous: a test machine may be loaded. The point is "about the limit", not "never stops".
  EXPECT_LT(plan->planning_seconds, options.time_limit_seconds + 2);
}

}  // namespace
}  // namespace memonger
