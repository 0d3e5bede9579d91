#include "memonger/planner.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "graph/dtype.h"
#include "memonger/recompute.h"
#include "memonger/verify_plan.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

using graph::Graph;
using ::memonger::testing::AssignByteTypes;
using ::memonger::testing::GraphFromText;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Graph Chain() {
  absl::StatusOr<Graph> g = GraphFromText(R"pb(
    name: "chain"
    external_input: "x"
    external_input: "w"
    op { type: "FC" input: "x" input: "w" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    op { type: "Relu" input: "c" output: "d" }
    external_output: "d"
    value_info { name: "w" role: ROLE_PARAM }
  )pb");
  EXPECT_TRUE(g.ok()) << g.status();
  AssignByteTypes(*g, {{"w", 5000}, {"b", 3000}}, 1000);
  return *std::move(g);
}

TEST(PlannerNameTest, EveryPlannerRoundTripsAndUnknownNamesAreListed) {
  for (PlannerKind p : {PlannerKind::kNone, PlannerKind::kMemongerDag,
                        PlannerKind::kMemongerGreedy, PlannerKind::kMemongerDp,
                        PlannerKind::kExactSharing, PlannerKind::kGreedyBySize,
                        PlannerKind::kBestFit, PlannerKind::kExact, PlannerKind::kAuto}) {
    absl::StatusOr<PlannerKind> parsed = ParsePlanner(PlannerName(p));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(PlannerName(PlannerKind::kMemongerDp), "memonger-dp");
  EXPECT_EQ(PlannerName(PlannerKind::kExact), "exact");
  absl::StatusOr<PlannerKind> bad = ParsePlanner("tvm");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("auto, best-fit, greedy-by-size, exact, exact-sharing, memonger-dag"));
}

// Found by fuzz/cli_args_fuzzer.cc (`--planner $'a\nb'` gave a two-line usage error): the names
// a command line or a saved plan gives are quoted on one line in every refusal.
TEST(PlannerNameTest, UnknownNamesAreQuotedOnOneLine) {
  const std::string name = "a\nb\tc";
  const std::vector<absl::Status> refusals = {
      ParsePlanner(name).status(), ParseOrder(name).status(), ParseExecution(name).status(),
      ParseRecompute(name).status(), graph::ParseDataType(name).status()};
  for (const absl::Status& status : refusals) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("'a\\nb\\tc'"));
    EXPECT_EQ(std::string(status.message()).find('\n'), std::string::npos) << status.message();
  }
}

// An op's workspace is an output nobody reads: it lives at that op's step only, and the offset
// planners place it like any other value, so consecutive ops' workspaces share bytes.
TEST(PlanMemoryTest, WorkspacesLiveAtTheirOpAndShare) {
  absl::StatusOr<Graph> g = GraphFromText(R"pb(
    name: "workspaces"
    external_input: "x"
    op { type: "ConvLike" input: "x" output: "a" output: "ws1" }
    op { type: "ConvLike" input: "a" output: "b" output: "ws2" }
    op { type: "ConvLike" input: "b" output: "c" output: "ws3" }
    external_output: "c"
    value_info { name: "ws1" role: ROLE_WORKSPACE }
    value_info { name: "ws2" role: ROLE_WORKSPACE }
    value_info { name: "ws3" role: ROLE_WORKSPACE }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  AssignByteTypes(*g, {{"ws1", 8192}, {"ws2", 8192}, {"ws3", 8192}}, 1024);
  for (PlannerKind planner : {PlannerKind::kGreedyBySize, PlannerKind::kBestFit,
                              PlannerKind::kExact, PlannerKind::kAuto}) {
    SCOPED_TRACE(PlannerName(planner));
    PlanOptions options;
    options.planner = planner;
    absl::StatusOr<Plan> plan = PlanMemory(*g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(*g, *plan).ok()) << VerifyPlan(*g, *plan);
    for (int step = 0; step < 3; ++step) {
      const graph::ValueId ws = g->FindValue("ws" + std::to_string(step + 1)).value();
      EXPECT_EQ(plan->lifetime[ws].first_step, step);
      EXPECT_EQ(plan->lifetime[ws].last_step, step);
    }
    // Peak: one workspace plus two activations (an op's input and output) = 8192 + 2048, plus
    // the graph input x (kept for the whole run) from step 1 on.
    EXPECT_EQ(plan->lower_bound_bytes, 8192 + 3 * 1024);
    EXPECT_EQ(plan->arena_bytes, plan->lower_bound_bytes);
    EXPECT_TRUE(plan->proven_optimal);
  }
}

// memonger's own benchmark net, trained: gradient sharing (memonger-dag) lowers the naive arena
// and offsets go lower still; every plan verifies.
TEST(PlanMemoryTest, Resnet50TrainingPlans) {
  absl::StatusOr<Graph> g =
      graph::BuildWorkload(*graph::ParseWorkloadSpec("resnet50:batch=4,image=64,mode=training"));
  ASSERT_TRUE(g.ok()) << g.status();
  int64_t arena[3] = {};
  const PlannerKind kPlanners[] = {PlannerKind::kNone, PlannerKind::kMemongerDag,
                                   PlannerKind::kAuto};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(PlannerName(kPlanners[i]));
    PlanOptions options;
    options.planner = kPlanners[i];
    options.memonger.mode = Mode::kTraining;
    absl::StatusOr<Plan> plan = PlanMemory(*g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(*g, *plan).ok()) << VerifyPlan(*g, *plan);
    arena[i] = plan->arena_bytes;
  }
  EXPECT_LT(arena[1], arena[0]);
  EXPECT_LT(arena[2], arena[1]);
}

// A caller asking only whether the arena fits (--fit): each answer is a verified plan that
// says the same as the full search. A threshold at or above the full search's arena gets an
// arena within it; one below the lower bound gets a valid plan above it, whichever is quick.
TEST(PlanMemoryTest, EnoughArenaBytesDecidesFittingAsTheFullSearchDoes) {
  absl::StatusOr<Graph> g =
      graph::BuildWorkload(*graph::ParseWorkloadSpec("resnet50:batch=2,image=64,mode=training"));
  ASSERT_TRUE(g.ok()) << g.status();
  PlanOptions options;
  options.memonger.mode = Mode::kTraining;
  options.time_limit_seconds = 0.5;
  absl::StatusOr<Plan> full = PlanMemory(*g, options);
  ASSERT_TRUE(full.ok()) << full.status();
  for (const int64_t enough :
       {full->arena_bytes, full->arena_bytes * 2, full->lower_bound_bytes - 1, int64_t{0}}) {
    SCOPED_TRACE(enough);
    PlanOptions asked = options;
    asked.enough_arena_bytes = enough;
    absl::StatusOr<Plan> plan = PlanMemory(*g, asked);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(*g, *plan).ok()) << VerifyPlan(*g, *plan);
    EXPECT_EQ(plan->arena_bytes <= enough, full->arena_bytes <= enough);
    EXPECT_GE(plan->arena_bytes, plan->lower_bound_bytes);
  }
}

TEST(PlanMemoryTest, RejectsBadOptions) {
  const Graph g = Chain();
  PlanOptions options;
  options.alignment = 48;
  EXPECT_EQ(PlanMemory(g, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.alignment = 0;
  EXPECT_EQ(PlanMemory(g, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.alignment = 1;
  options.time_limit_seconds = 0;
  EXPECT_EQ(PlanMemory(g, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlanMemoryTest, RequiresTypes) {
  absl::StatusOr<Graph> g = GraphFromText(R"pb(
    external_input: "x" op { type: "Relu" input: "x" output: "y" })pb");
  ASSERT_TRUE(g.ok());
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("'x'"));
}

TEST(PlanMemoryTest, NoneGivesEveryClassItsOwnMemory) {
  const Graph g = Chain();
  PlanOptions options;
  options.planner = PlannerKind::kNone;
  options.model_name = "m";
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(VerifyPlan(g, *plan).ok()) << VerifyPlan(g, *plan);
  EXPECT_EQ(plan->model, "m");
  EXPECT_EQ(plan->planner, "none");
  EXPECT_FALSE(plan->proven_optimal);
  // x 1000 -> 1024, a 1024, b 3000 -> 3072, c 1024, d 1024; w static.
  EXPECT_EQ(plan->naive_bytes, 1024 * 4 + 3072);
  EXPECT_EQ(plan->arena_bytes, plan->naive_bytes);
  EXPECT_EQ(SumOfBufferSizes(*plan), plan->naive_bytes);
  EXPECT_EQ(plan->static_bytes, 5000);
  // Steps: x (a graph input, kept for the whole run) and a [0]; x,a,b [1]; x,b,c [2]; x,c,d [3].
  ASSERT_EQ(plan->steps.size(), 4u);
  EXPECT_EQ(plan->steps[0].live_bytes, 2048);
  EXPECT_EQ(plan->steps[1].live_bytes, 5120);
  EXPECT_EQ(plan->lower_bound_bytes, 5120);
  EXPECT_EQ(plan->peak_step, 1);
  EXPECT_THAT(plan->peak_values,
              ElementsAre(*g.FindValue("b"), *g.FindValue("x"), *g.FindValue("a")));
  EXPECT_EQ(plan->buffer_of_value[*g.FindValue("w")], -1);
  EXPECT_EQ(plan->offset_of_value[*g.FindValue("w")], kNoOffset);
}

TEST(PlanMemoryTest, SharingPlannersBeatNone) {
  const Graph g = Chain();
  for (PlannerKind p : {PlannerKind::kMemongerGreedy, PlannerKind::kMemongerDp,
                        PlannerKind::kExactSharing}) {
    PlanOptions options;
    options.planner = p;
    options.alignment = 1;
    absl::StatusOr<Plan> plan = PlanMemory(g, options);
    ASSERT_TRUE(plan.ok()) << PlannerName(p) << ": " << plan.status();
    EXPECT_TRUE(VerifyPlan(g, *plan).ok()) << VerifyPlan(g, *plan);
    EXPECT_LT(plan->arena_bytes, plan->naive_bytes) << PlannerName(p);
    EXPECT_GE(plan->arena_bytes, plan->lower_bound_bytes) << PlannerName(p);
  }
}

}  // namespace
}  // namespace memonger
