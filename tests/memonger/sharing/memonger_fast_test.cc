#include "memonger/sharing/memonger_fast.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Buffers freed by one op are pushed in the iteration order of Caffe2's
// std::unordered_set<std::string> of their names (for p and q: q, p); the next outputs pop
// them last in, first out.
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
  // Step 2 frees p then q, pushed after s is served (s gets nothing) in the set's order:
  // stack [q, p]. Step 3 frees s; t pops p; stack [q, s]. Step 4: u pops s, the last pushed.
  // q is never reused.
  const Fast f = Plan(g);
  ASSERT_GE(f.result.groups.size(), 3u);
  EXPECT_THAT(f.result.groups[0], ElementsAre(Id(g, "p"), Id(g, "t")));
  EXPECT_THAT(f.result.groups[1], ElementsAre(Id(g, "q")));
  EXPECT_THAT(f.result.groups[2], ElementsAre(Id(g, "s"), Id(g, "u")));
  EXPECT_THAT(std::vector<std::string>(f.result.names.begin(), f.result.names.begin() + 3),
              ElementsAre("__m0_shared", "__m1_shared", "__m2_shared"));
}

// One op frees many blobs at once: x -> b_0 ... x -> b_{k-1}; Sum(b_0, ..., b_{k-1}) -> s frees
// them all (s takes nothing: the stack is empty); Split(s) -> o_0 ... o_{k-1} pops the stack,
// o_0 first; Sum(o_0, ..., o_{k-1}) -> y. Caffe2 pushed the freed names in the iteration order
// of a std::unordered_set<std::string> filled in input order, so o_j takes the (k-1-j)-th name
// of that order. The orders below were printed by a real std::unordered_set<std::string>
// (libstdc++ of GCC 12, Debian 12; the same with clang++), not computed by the planner; the
// input order (the old behaviour) fails every case. libstdc++ uses 13 buckets up to 13 names
// and rehashes at the 14th (29 buckets) and the 30th (59).
constexpr const char* kFreedNames[] = {
    "conv1",          "res2a_branch1",  "res2a_branch2a", "res2a_branch2b", "res2a_branch2c",
    "res2a",          "res2b_branch2a", "res2b_branch2b", "res2b_branch2c", "res2b",
    "res2c_branch2a", "res2c_branch2b", "res2c_branch2c", "res2c",          "res3a_branch1",
    "res3a_branch2a", "res3a_branch2b", "res3a_branch2c", "res3a",          "res3b_branch2a",
    "res3b_branch2b", "res3b_branch2c", "res3b",          "res3c_branch2a", "res3c_branch2b",
    "res3c_branch2c", "res3c",          "res3d_branch2a", "res3d_branch2b", "res3d_branch2c"};

struct FreedSetCase {
  std::string name;
  int freed;                           // the first `freed` names of kFreedNames, in input order
  std::vector<std::string> set_order;  // a std::unordered_set<std::string>'s iteration order
};

class MemongerFastFreedSetTest : public ::testing::TestWithParam<FreedSetCase> {};

TEST_P(MemongerFastFreedSetTest, OutputsPopTheSetOrderLastFirst) {
  const FreedSetCase& c = GetParam();
  ASSERT_EQ(static_cast<int>(c.set_order.size()), c.freed);
  std::string text = "external_input: \"x\"\nexternal_output: \"y\"\n";
  std::string sum = "op { type: \"Sum\"";
  std::string split = "op { type: \"Split\" input: \"s\"";
  std::string join = "op { type: \"Sum\"";
  for (int i = 0; i < c.freed; ++i) {
    absl::StrAppend(&text, "op { type: \"Relu\" input: \"x\" output: \"", kFreedNames[i], "\" }\n");
    absl::StrAppend(&sum, " input: \"", kFreedNames[i], "\"");
    absl::StrAppend(&split, " output: \"o", i, "\"");
    absl::StrAppend(&join, " input: \"o", i, "\"");
  }
  absl::StrAppend(&text, sum, " output: \"s\" }\n", split, " }\n", join, " output: \"y\" }\n");
  const graph::Graph g = Net(text);
  const Fast f = Plan(g);

  // The buffer each o_j took, by its canonical blob's name.
  std::vector<std::string> taken;
  for (int j = 0; j < c.freed; ++j) {
    const ValueId o = Id(g, absl::StrCat("o", j));
    for (const std::vector<ValueId>& group : f.result.groups) {
      if (std::find(group.begin(), group.end(), o) != group.end()) {
        taken.push_back(g.value(group[0]).name);
      }
    }
  }
  const std::vector<std::string> expected(c.set_order.rbegin(), c.set_order.rend());
  EXPECT_EQ(taken, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Caffe2, MemongerFastFreedSetTest,
    ::testing::Values(
        FreedSetCase{"two", /*freed=*/2, /*set_order=*/{"res2a_branch1", "conv1"}},
        FreedSetCase{"three", /*freed=*/3,
                     /*set_order=*/{"res2a_branch2a", "res2a_branch1", "conv1"}},
        FreedSetCase{"thirteen_no_rehash", /*freed=*/13,
                     /*set_order=*/{"res2b", "res2c_branch2b", "res2b_branch2c",
                                    "res2c_branch2a", "res2b_branch2a", "res2b_branch2b",
                                    "res2a", "res2a_branch2c", "res2c_branch2c",
                                    "res2a_branch2b", "res2a_branch2a", "res2a_branch1",
                                    "conv1"}},
        FreedSetCase{"fourteen_one_rehash", /*freed=*/14,
                     /*set_order=*/{"res2c", "conv1", "res2a_branch2a", "res2a_branch2b",
                                    "res2a_branch1", "res2c_branch2c", "res2a_branch2c",
                                    "res2b_branch2b", "res2b_branch2a", "res2c_branch2a",
                                    "res2a", "res2b_branch2c", "res2c_branch2b", "res2b"}},
        FreedSetCase{"thirty_two_rehashes", /*freed=*/30,
                     /*set_order=*/{"res3d_branch2c", "res2b", "res2c_branch2b",
                                    "res3b_branch2b", "res2b_branch2c", "res2a",
                                    "res2c_branch2a", "res3c_branch2b", "res2b_branch2a",
                                    "res2a_branch2c", "res2c_branch2c", "res2a_branch1",
                                    "res2b_branch2b", "res2a_branch2b", "res3c",
                                    "res2a_branch2a", "res3b_branch2a", "res3a_branch2b",
                                    "res2c", "res3c_branch2a", "res3a_branch1",
                                    "res3a_branch2a", "res3a_branch2c", "res3a",
                                    "res3b_branch2c", "conv1", "res3c_branch2c", "res3b",
                                    "res3d_branch2a", "res3d_branch2b"}}),
    [](const ::testing::TestParamInfo<FreedSetCase>& info) { return info.param.name; });

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
