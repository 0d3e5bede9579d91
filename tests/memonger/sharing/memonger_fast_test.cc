#include "memonger/sharing/memonger_fast.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/schedule.h"
#include "memonger/verify_plan.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using graph::ValueId;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

graph::Graph Net(const std::string& text) {
  absl::StatusOr<graph::Graph> g = testing::GraphFromText(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return graph::Graph();
  testing::AssignByteTypes(*g, {}, 64);
  return *std::move(g);
}

struct Fast {
  Liveness liveness;
  MemongerFastResult result;
};

Fast Plan(const graph::Graph& g) {
  Fast f;
  absl::StatusOr<Schedule> schedule = MakeSchedule(g, OrderKind::kGiven);
  EXPECT_TRUE(schedule.ok());
  LivenessOptions options;
  options.blob_per_name = true;
  absl::StatusOr<Liveness> live = ComputeLiveness(g, *schedule, options);
  EXPECT_TRUE(live.ok()) << live.status();
  f.liveness = *std::move(live);
  absl::StatusOr<MemongerFastResult> r = PlanMemongerFast(g, f.liveness);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) f.result = *std::move(r);
  return f;
}

ValueId Id(const graph::Graph& g, const std::string& name) { return *g.FindValue(name); }

// x -> a -> b -> c -> d (an output). a dies at step 1 and becomes __m0_shared, b dies at step 2
// (__m1_shared), c takes a's buffer at step 2; d is static. Every value that dies is renamed,
// shared or not, as optimize_inference_net does.
TEST(MemongerFastTest, ChainRecyclesAndNamesEveryDeadValue) {
  const graph::Graph g = Net(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    op { type: "Relu" input: "c" output: "d" }
    external_output: "d"
  )pb");
  const Fast f = Plan(g);
  EXPECT_THAT(f.result.groups,
              ElementsAre(ElementsAre(Id(g, "a"), Id(g, "c")), ElementsAre(Id(g, "b")),
                          ElementsAre(Id(g, "x")), ElementsAre(Id(g, "d"))));
  EXPECT_THAT(f.result.names, ElementsAre("__m0_shared", "__m1_shared", "", ""));
}

// Buffers freed by one op are pushed in the op's input order: the next outputs pop them last
// in, first out.
TEST(MemongerFastTest, FreeBuffersAreALifoStack) {
  const graph::Graph g = Net(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "p" }
    op { type: "Relu" input: "x" output: "q" }
    op { type: "Sum" input: "p" input: "q" output: "s" }
    op { type: "Relu" input: "s" output: "t" }
    op { type: "Relu" input: "t" output: "u" }
    op { type: "Sum" input: "t" input: "u" output: "y" }
    external_output: "y"
  )pb");
  // Step 2 frees p then q, pushed after s is served (s gets nothing): stack [p, q]. Step 3
  // frees s; t pops q; stack [p, s]. Step 4: u pops s, the last pushed. p is never reused.
  const Fast f = Plan(g);
  ASSERT_GE(f.result.groups.size(), 3u);
  EXPECT_THAT(f.result.groups[0], ElementsAre(Id(g, "p")));
  EXPECT_THAT(f.result.groups[1], ElementsAre(Id(g, "q"), Id(g, "t")));
  EXPECT_THAT(f.result.groups[2], ElementsAre(Id(g, "s"), Id(g, "u")));
  EXPECT_THAT(std::vector<std::string>(f.result.names.begin(), f.result.names.begin() + 3),
              ElementsAre("__m0_shared", "__m1_shared", "__m2_shared"));
}

// An op never gets its own inputs' memory; in place ops keep their class; static names stay.
TEST(MemongerFastTest, NoNewInPlacePairsAndStaticsStay) {
  const graph::Graph g = Net(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    external_output: "c"
  )pb");
  const Fast f = Plan(g);
  // a (both versions) dies at step 2, where b is written: b must not take it.
  for (const auto& group : f.result.groups) {
    const bool has_a = std::find(group.begin(), group.end(), Id(g, "a")) != group.end() ||
                       std::find(group.begin(), group.end(), g.FindVersions("a")[0]) != group.end();
    const bool has_b = std::find(group.begin(), group.end(), Id(g, "b")) != group.end();
    EXPECT_FALSE(has_a && has_b);
  }
}

// Through PlanMemory, every plan verifies on random nets (in-place ops, several writers of a
// name, several devices).
TEST(MemongerFastTest, RandomNetsVerify) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions options;
    options.num_ops = 5 + static_cast<int>(seed % 40);
    options.num_devices = 1 + static_cast<int>(seed % 2);
    const graph::Graph g = testing::RandomGraph(seed, options);
    PlanOptions plan_options;
    plan_options.planner = PlannerKind::kMemongerFast;
    absl::StatusOr<memonger::Plan> plan = PlanMemory(g, plan_options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(g, *plan).ok()) << VerifyPlan(g, *plan);
    EXPECT_LE(plan->arena_bytes, plan->naive_bytes);
  }
}

TEST(MemongerFastTest, ParallelExecutionIsRefused) {
  const graph::Graph g = Net(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "y" }
    external_output: "y"
  )pb");
  PlanOptions options;
  options.planner = PlannerKind::kMemongerFast;
  options.execution = ExecutionModel::kParallel;
  absl::StatusOr<memonger::Plan> plan = PlanMemory(g, options);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), ::testing::HasSubstr("memonger-dag"));
}

}  // namespace
}  // namespace memonger
