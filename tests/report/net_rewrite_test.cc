#include "report/net_rewrite.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/net_def.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "report/plan_report.h"
#include "tests/test_support.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

using ::memonger::testing::GraphFromText;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A chain of FC layers with an in-place Relu: plenty to share.
constexpr char kChain[] = R"pb(
  name: "chain"
  external_input: "data"
  external_input: "w1" external_input: "b1"
  external_input: "w2" external_input: "b2"
  external_input: "w3" external_input: "b3"
  external_input: "w4" external_input: "b4"
  external_output: "out"
  op { type: "FC" input: "data" input: "w1" input: "b1" output: "fc1" }
  op { type: "Relu" input: "fc1" output: "fc1" }
  op { type: "FC" input: "fc1" input: "w2" input: "b2" output: "fc2" }
  op { type: "FC" input: "fc2" input: "w3" input: "b3" output: "fc3" }
  op { type: "FC" input: "fc3" input: "w4" input: "b4" output: "fc4" }
  op { type: "Softmax" input: "fc4" output: "out" }
  value_info { name: "data" dtype: FLOAT has_shape: true dim { size: 4 } dim { size: 16 } }
  value_info { name: "w1" dtype: FLOAT has_shape: true dim { size: 16 } dim { size: 16 } role: ROLE_PARAM }
  value_info { name: "b1" dtype: FLOAT has_shape: true dim { size: 16 } role: ROLE_PARAM }
  value_info { name: "w2" dtype: FLOAT has_shape: true dim { size: 16 } dim { size: 16 } role: ROLE_PARAM }
  value_info { name: "b2" dtype: FLOAT has_shape: true dim { size: 16 } role: ROLE_PARAM }
  value_info { name: "w3" dtype: FLOAT has_shape: true dim { size: 16 } dim { size: 16 } role: ROLE_PARAM }
  value_info { name: "b3" dtype: FLOAT has_shape: true dim { size: 16 } role: ROLE_PARAM }
  value_info { name: "w4" dtype: FLOAT has_shape: true dim { size: 16 } dim { size: 16 } role: ROLE_PARAM }
  value_info { name: "b4" dtype: FLOAT has_shape: true dim { size: 16 } role: ROLE_PARAM }
)pb";

graph::Graph TypedGraph(const std::string& text) {
  auto g = GraphFromText(text);
  EXPECT_TRUE(g.ok()) << g.status();
  const absl::Status s = graph::InferShapes(*g, {});
  EXPECT_TRUE(s.ok()) << s;
  return *std::move(g);
}

class NetRewriteTest : public ::testing::TestWithParam<PlannerKind> {};

TEST_P(NetRewriteTest, RewrittenNetComputesTheSameGraph) {
  graph::Graph g = TypedGraph(kChain);
  PlanOptions options;
  options.planner = GetParam();
  auto plan = PlanMemory(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(VerifyPlan(g, *plan).ok());
  auto rewritten = RewriteNet(g, *plan);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  const proto::NetDef reference = ReferenceNet(g, *plan);
  EXPECT_TRUE(VerifyGraphEquality(reference, rewritten->net).ok());
  EXPECT_TRUE(VerifyInplaceBlobs(reference, rewritten->net, plan->liveness.in_place).ok())
      << VerifyInplaceBlobs(reference, rewritten->net, plan->liveness.in_place);
  // Without the plan's in-place reuse, the pairs it names are refused.
  if (plan->liveness.in_place) {
    EXPECT_FALSE(VerifyInplaceBlobs(reference, rewritten->net).ok());
  }
  // External names never change; params keep theirs.
  EXPECT_EQ(rewritten->net.external_input(0), "data");
  EXPECT_EQ(rewritten->net.external_output(0), "out");
  EXPECT_EQ(rewritten->net.op(0).input(1), "w1");
  // The in-place Relu still writes in place.
  EXPECT_EQ(rewritten->net.op(1).input(0), rewritten->net.op(1).output(0));
  // Values sharing a buffer share a name (the external's name when the buffer holds one).
  int renamed = 0;
  for (graph::ValueId v = 0; v < g.num_values(); ++v) {
    renamed += rewritten->value_names[v] != g.value(v).name ? 1 : 0;
  }
  if (GetParam() != PlannerKind::kNone) {
    EXPECT_GE(SharedBufferCount(g, *plan), 1);
    EXPECT_GE(renamed, 1);
  } else {
    EXPECT_EQ(SharedBufferCount(g, *plan), 0);
    EXPECT_EQ(renamed, 0);
    EXPECT_EQ(rewritten->shared_buffers, 0);
  }
  // The rewritten net loads and infers again.
  auto again = graph::GraphFromNetDef(rewritten->net);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(graph::InferShapes(*again, {}).ok());
}

INSTANTIATE_TEST_SUITE_P(Planners, NetRewriteTest,
                         ::testing::Values(PlannerKind::kNone, PlannerKind::kMemongerDag,
                                           PlannerKind::kMemongerGreedy, PlannerKind::kMemongerDp,
                                           PlannerKind::kExactSharing),
                         [](const ::testing::TestParamInfo<PlannerKind>& info) {
                           std::string name(PlannerName(info.param));
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// --views keeps a view's output in its input's memory; the rewritten net names the two apart
// (one name would make the view in place and hand its shape to later readers of the input), so
// the net still computes the same graph. Every random net with a Reshape was refused before.
TEST(NetRewriteTest, ViewsKeptInTheirInputsMemoryAreNamedApart) {
  int views_named_apart = 0;
  for (int seed = 1; seed <= 12; ++seed) {
    absl::StatusOr<graph::WorkloadSpec> spec =
        graph::ParseWorkloadSpec(absl::StrCat("random:ops=40,seed=", seed));
    ASSERT_TRUE(spec.ok());
    absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*spec);
    ASSERT_TRUE(g.ok()) << g.status();
    for (PlannerKind planner : {PlannerKind::kNone, PlannerKind::kAuto, PlannerKind::kMemongerDag}) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, " ", PlannerName(planner)));
      PlanOptions options;
      options.planner = planner;
      options.liveness.views = true;
      absl::StatusOr<Plan> plan = PlanMemory(*g, options);
      ASSERT_TRUE(plan.ok()) << plan.status();
      absl::StatusOr<RewrittenNet> rewritten = RewriteNet(*g, *plan);
      ASSERT_TRUE(rewritten.ok()) << rewritten.status();
      const proto::NetDef reference = ReferenceNet(*g, *plan);
      EXPECT_TRUE(VerifyGraphEquality(reference, rewritten->net).ok())
          << VerifyGraphEquality(reference, rewritten->net);
      EXPECT_TRUE(VerifyInplaceBlobs(reference, rewritten->net, plan->liveness.in_place).ok())
          << VerifyInplaceBlobs(reference, rewritten->net, plan->liveness.in_place);
      for (const graph::Op& op : g->ops()) {
        if (!op.view || op.inputs.empty() || op.outputs.empty()) continue;
        const graph::ValueId in = op.inputs[0], out = op.outputs[0];
        if (plan->buffer_of_value[out] >= 0 &&
            plan->buffer_of_value[out] == plan->buffer_of_value[in]) {
          EXPECT_NE(rewritten->value_names[in], rewritten->value_names[out]) << op.name;
          ++views_named_apart;
        }
      }
    }
  }
  EXPECT_GT(views_named_apart, 0);  // the nets have views the plans keep in place
}

TEST(NetRewriteTest, SharedValuesGetSharedNames) {
  graph::Graph g = TypedGraph(kChain);
  PlanOptions options;
  options.planner = PlannerKind::kExactSharing;  // graph inputs and outputs are kept: unshared
  auto plan = PlanMemory(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto rewritten = RewriteNet(g, *plan);
  ASSERT_TRUE(rewritten.ok());
  // fc1 (with its in-place Relu output) and fc3 do not overlap, nor do fc2 and fc4: the values
  // of a buffer without an external value get a shared name.
  for (graph::ValueId v = 0; v < g.num_values(); ++v) {
    const int b = plan->buffer_of_value[v];
    if (b < 0) continue;
    bool has_external = false;
    int members = 0;
    for (graph::ValueId u = 0; u < g.num_values(); ++u) {
      if (plan->buffer_of_value[u] != b) continue;
      ++members;
      for (graph::ValueId e : g.inputs()) has_external = has_external || e == u;
      for (graph::ValueId e : g.outputs()) has_external = has_external || e == u;
    }
    const bool one_class = members == 1 || (members == 2 && g.value(v).name == "fc1");
    if (!has_external && !one_class) {
      EXPECT_THAT(rewritten->value_names[v], StartsWith(kSharedBlobPrefix)) << g.value(v).name;
    }
  }
  EXPECT_GE(rewritten->shared_buffers, 1);
}

// The memonger baselines name buffers as Caffe2's memonger does: "<namescope>__m<k>_shared".
TEST(NetRewriteTest, MemongerBaselinesUseMemongersNames) {
  graph::Graph g = TypedGraph(kChain);
  for (PlannerKind planner : {PlannerKind::kMemongerDag, PlannerKind::kMemongerFast}) {
    SCOPED_TRACE(PlannerName(planner));
    PlanOptions options;
    options.planner = planner;
    options.memonger.namescope = "ns/";
    auto plan = PlanMemory(g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(VerifyPlan(g, *plan).ok()) << VerifyPlan(g, *plan);
    auto rewritten = RewriteNet(g, *plan);
    ASSERT_TRUE(rewritten.ok());
    int renamed = 0;
    for (graph::ValueId v = 0; v < g.num_values(); ++v) {
      const std::string& name = rewritten->value_names[v];
      if (name == g.value(v).name) continue;
      ++renamed;
      // optimize_inference_for_dag prefixes the namescope; optimize_inference_fast does not.
      EXPECT_THAT(name, ::testing::MatchesRegex(planner == PlannerKind::kMemongerDag
                                                    ? "ns/__m[0-9]+_shared"
                                                    : "__m[0-9]+_shared"))
          << g.value(v).name;
    }
    EXPECT_GE(renamed, 2);
    EXPECT_EQ(rewritten->shared_buffers, 0);  // no "__mg_shared_" names
  }
}

// A --static name is the caller's: its latest version keeps the name in the rewritten net,
// whatever planner shares what.
TEST(NetRewriteTest, StaticNamesKeepTheirName) {
  graph::Graph g = TypedGraph(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "s" }
    op { type: "Relu" input: "s" output: "t" }
    op { type: "Relu" input: "t" output: "s" }
    op { type: "Relu" input: "s" output: "y" }
    external_output: "y"
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 64 } }
  )pb");
  for (PlannerKind planner : {PlannerKind::kAuto, PlannerKind::kExactSharing,
                              PlannerKind::kMemongerGreedy}) {
    SCOPED_TRACE(PlannerName(planner));
    PlanOptions options;
    options.planner = planner;
    options.liveness.static_names = {"s"};
    auto plan = PlanMemory(g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(VerifyPlan(g, *plan).ok()) << VerifyPlan(g, *plan);
    auto rewritten = RewriteNet(g, *plan);
    ASSERT_TRUE(rewritten.ok());
    EXPECT_EQ(rewritten->value_names[*g.FindValue("s")], "s");
  }
}

// memonger's verify_graph_equality cases (memonger_test.py 20-23).
proto::NetDef Net(const std::string& text) {
  auto net = graph::ParseNetDef(text, graph::NetFileFormat::kText, "<test>");
  EXPECT_TRUE(net.ok()) << net.status();
  return *net;
}

TEST(GraphEqualityTest, RenamedNetsAreEqual) {
  const auto a = Net(R"pb(
    op { type: "FC" input: "data" output: "x" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "FC" input: "x" output: "z" }
    op { type: "Sum" input: "y" input: "z" output: "out" })pb");
  const auto b = Net(R"pb(
    op { type: "FC" input: "data" output: "other_x" }
    op { type: "FC" input: "other_x" output: "other_y" }
    op { type: "FC" input: "other_x" output: "other_z" }
    op { type: "Sum" input: "other_y" input: "other_z" output: "out" })pb");
  EXPECT_TRUE(VerifyGraphEquality(a, b).ok());
}

TEST(GraphEqualityTest, HarderEqualCase) {
  const auto a = Net(R"pb(
    op { type: "FC" input: "data" output: "x" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "FC" input: "x" output: "z" }
    op { type: "FC" input: "y" output: "u" }
    op { type: "FC" input: "z" output: "v" }
    op { type: "Sum" input: "u" input: "v" output: "out" })pb");
  const auto b = Net(R"pb(
    op { type: "FC" input: "data" output: "x" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "FC" input: "x" output: "z" }
    op { type: "FC" input: "y" output: "y" }
    op { type: "FC" input: "z" output: "z" }
    op { type: "Sum" input: "y" input: "z" output: "out" })pb");
  EXPECT_TRUE(VerifyGraphEquality(a, b).ok());
}

TEST(GraphEqualityTest, DifferentDataflowIsNotEqual) {
  const auto a = Net(R"pb(
    op { type: "FC" input: "data" output: "x" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "FC" input: "x" output: "z" }
    op { type: "Sum" input: "y" input: "z" output: "out" })pb");
  const auto b = Net(R"pb(
    op { type: "FC" input: "data" output: "x" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "Sum" input: "y" input: "y" output: "out" })pb");
  const absl::Status s = VerifyGraphEquality(a, b);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("op 3"));
}

TEST(GraphEqualityTest, HarderUnequalCase) {
  const auto a = Net(R"pb(
    op { type: "FC" input: "data" output: "x" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "FC" input: "x" output: "z" }
    op { type: "FC" input: "y" output: "u" }
    op { type: "FC" input: "z" output: "v" }
    op { type: "Sum" input: "u" input: "v" output: "out" })pb");
  const auto b = Net(R"pb(
    op { type: "FC" input: "data" output: "x" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "FC" input: "x" output: "y" }
    op { type: "FC" input: "y" output: "u" }
    op { type: "FC" input: "y" output: "v" }
    op { type: "Sum" input: "u" input: "v" output: "out" })pb");
  EXPECT_FALSE(VerifyGraphEquality(a, b).ok());
}

TEST(InplaceBlobsTest, NewInPlacePairIsRejected) {
  const auto a = Net(R"pb(
    op { type: "Relu" input: "x" output: "y" }
    op { type: "Relu" input: "y" output: "z" })pb");
  const auto b = Net(R"pb(
    op { type: "Relu" input: "x" output: "y" }
    op { type: "Relu" input: "y" output: "y" })pb");
  const absl::Status s = VerifyInplaceBlobs(a, b);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("(0,0)"));
  EXPECT_TRUE(VerifyInplaceBlobs(a, a).ok());
}

}  // namespace
}  // namespace memonger
