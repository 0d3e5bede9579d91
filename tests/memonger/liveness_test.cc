#include "memonger/liveness.h"

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/op_schema.h"
#include "gtest/gtest.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::OpId;
using graph::ValueId;
using ::memonger::testing::AssignByteTypes;
using ::memonger::testing::GraphFromText;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Graph Typed(const std::string& pbtxt, const std::map<std::string, int64_t>& bytes = {},
            int64_t default_bytes = 100) {
  absl::StatusOr<Graph> g = GraphFromText(pbtxt);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Graph();
  AssignByteTypes(*g, bytes, default_bytes);
  return *std::move(g);
}

Liveness Live(const Graph& g, LivenessOptions options = {}, OrderKind order = OrderKind::kGiven) {
  absl::StatusOr<Schedule> s = MakeSchedule(g, order);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::StatusOr<Liveness> l = ComputeLiveness(g, *s, options);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *std::move(l) : Liveness();
}

Schedule Given(const Graph& g) {
  absl::StatusOr<Schedule> s = MakeSchedule(g, OrderKind::kGiven);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : Schedule();
}

ValueId Id(const Graph& g, const std::string& name) {
  std::optional<ValueId> id = g.FindValue(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(0);
}

std::pair<int, int> Range(const Liveness& l, ValueId v) {
  return {l.lifetime[v].first_step, l.lifetime[v].last_step};
}

TEST(ExecutionNameTest, RoundTrips) {
  EXPECT_EQ(ExecutionName(ExecutionModel::kParallel), "parallel");
  EXPECT_EQ(*ParseExecution("serial"), ExecutionModel::kSerial);
  EXPECT_EQ(*ParseExecution("parallel"), ExecutionModel::kParallel);
  absl::StatusOr<ExecutionModel> bad = ParseExecution("dag");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("serial, parallel"));
}

TEST(LivenessTest, LifetimesFromProducerToLastReader) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Split" input: "a" output: "b" output: "dead" }
    op { type: "Relu" input: "b" output: "y" }
    op { type: "Relu" input: "y" output: "z" }
    external_output: "z"
  )pb");
  LivenessOptions recycle;
  recycle.recycle_inputs = true;
  const Liveness l = Live(g, recycle);
  EXPECT_EQ(l.num_steps, 4);
  EXPECT_EQ(Range(l, Id(g, "x")), std::make_pair(0, 0));
  EXPECT_EQ(Range(l, Id(g, "a")), std::make_pair(0, 1));
  EXPECT_EQ(Range(l, Id(g, "b")), std::make_pair(1, 2));
  EXPECT_EQ(Range(l, Id(g, "dead")), std::make_pair(1, 1));  // nobody reads it
  EXPECT_EQ(Range(l, Id(g, "y")), std::make_pair(2, 3));
  EXPECT_EQ(Range(l, Id(g, "z")), std::make_pair(3, 3));
  for (ValueId v = 0; v < g.num_values(); ++v) {
    EXPECT_TRUE(l.planned[v]);
    EXPECT_EQ(l.alias_root[v], v);
    EXPECT_THAT(l.members[v], ElementsAre(v));
    EXPECT_EQ(l.class_bytes[v], 100);
  }
}

// Graph inputs, like outputs, belong to the caller (fed again, read by the next iteration):
// live for the whole run unless recycle_inputs, then from step 0 to their last reader.
TEST(LivenessTest, GraphInputsAndOutputsLiveForTheWholeRunUnlessInputsAreRecycled) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    external_input: "late"
    external_input: "unused"
    op { type: "Relu" input: "x" output: "early" }
    op { type: "Relu" input: "early" output: "b" }
    op { type: "Sum" input: "b" input: "late" output: "c" }
    external_output: "early"
    external_output: "c"
  )pb");
  const Liveness l = Live(g);
  EXPECT_EQ(Range(l, Id(g, "x")), std::make_pair(0, 2));
  EXPECT_EQ(Range(l, Id(g, "late")), std::make_pair(0, 2));
  EXPECT_EQ(Range(l, Id(g, "unused")), std::make_pair(0, 2));
  EXPECT_EQ(Range(l, Id(g, "early")), std::make_pair(0, 2));
  EXPECT_EQ(Range(l, Id(g, "c")), std::make_pair(2, 2));
  EXPECT_EQ(Range(l, Id(g, "b")), std::make_pair(1, 2));

  LivenessOptions recycle;
  recycle.recycle_inputs = true;
  const Liveness r = Live(g, recycle);
  EXPECT_EQ(Range(r, Id(g, "x")), std::make_pair(0, 0));
  EXPECT_EQ(Range(r, Id(g, "late")), std::make_pair(0, 2));
  EXPECT_EQ(Range(r, Id(g, "unused")), std::make_pair(0, 0));
  EXPECT_EQ(Range(r, Id(g, "early")), std::make_pair(0, 2));

  // --static: kept for the whole run like an output; an unknown name is an error.
  LivenessOptions pinned = recycle;
  pinned.static_names = {"b"};
  EXPECT_EQ(Range(Live(g, pinned), Id(g, "b")), std::make_pair(1, 2));
  pinned.static_names = {"x"};
  EXPECT_EQ(Range(Live(g, pinned), Id(g, "x")), std::make_pair(0, 2));
  pinned.static_names = {"nope"};
  absl::StatusOr<Liveness> bad = ComputeLiveness(g, Given(g), pinned);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'nope'"));
}

// memonger's model: a blob is a name. Two writes of one name (not in place) are one class.
TEST(LivenessTest, BlobPerNameJoinsTheVersionsOfAName) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "s" }
    op { type: "Relu" input: "s" output: "a" }
    op { type: "Relu" input: "x" output: "s" }
    op { type: "Relu" input: "s" output: "y" }
    external_output: "y"
  )pb");
  const std::vector<ValueId> s = g.FindVersions("s");
  ASSERT_EQ(s.size(), 2u);
  const Liveness ssa = Live(g);
  EXPECT_NE(ssa.alias_root[s[1]], ssa.alias_root[s[0]]);
  LivenessOptions by_name;
  by_name.blob_per_name = true;
  const Liveness l = Live(g, by_name);
  EXPECT_EQ(l.alias_root[s[1]], s[0]);
  EXPECT_EQ(Range(l, s[0]), std::make_pair(0, 3));
  EXPECT_THAT(l.members[s[0]], ElementsAre(s[0], s[1]));
}

// Size-blind: every value one byte, types not needed.
TEST(LivenessTest, SizeBlindCountsEveryValueAsOneByte) {
  graph::GraphBuilder b("untyped");
  b.AddExternalInput("x");
  for (const auto& [in, out] : {std::pair{"x", "a"}, std::pair{"a", "y"}}) {
    graph::OpSpec relu;
    relu.type = "Relu";
    relu.inputs = {in};
    relu.outputs = {out};
    b.AddOp(std::move(relu));
  }
  b.AddExternalOutput("y");
  absl::StatusOr<Graph> g = std::move(b).Build();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ComputeLiveness(*g, Given(*g)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  LivenessOptions blind;
  blind.size_blind = true;
  absl::StatusOr<Liveness> l = ComputeLiveness(*g, Given(*g), blind);
  ASSERT_TRUE(l.ok()) << l.status();
  for (ValueId v = 0; v < g->num_values(); ++v) EXPECT_EQ(l->class_bytes[v], 1);
}

// memonger_test.py scenario 13: three in-place Copy ops on one value are one alias class.
TEST(LivenessTest, InPlaceChainIsOneAliasClass) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "b1" }
    op { type: "Copy" input: "b1" output: "b1" }
    op { type: "Copy" input: "b1" output: "b1" }
    op { type: "Copy" input: "b1" output: "b1" }
    op { type: "Relu" input: "b1" output: "out" }
    op { type: "Relu" input: "out" output: "out2" }
  )pb", {{"b1", 64}});
  const Liveness l = Live(g);
  const std::vector<ValueId> b1 = g.FindVersions("b1");
  ASSERT_EQ(b1.size(), 4u);
  for (ValueId v : b1) {
    EXPECT_EQ(l.alias_root[v], b1[0]);
    EXPECT_EQ(Range(l, v), std::make_pair(0, 4));
  }
  EXPECT_THAT(l.members[b1[0]], ElementsAre(b1[0], b1[1], b1[2], b1[3]));
  EXPECT_TRUE(l.members[b1[1]].empty());
  EXPECT_EQ(l.class_bytes[b1[0]], 64);
  EXPECT_EQ(l.bytes[b1[3]], 64);
}

TEST(LivenessTest, InPlaceOnAGraphInputStartsAtStepZero) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    external_input: "y"
    op { type: "Relu" input: "y" output: "a" }
    op { type: "Relu" input: "x" output: "x" }
    op { type: "Sum" input: "x" input: "a" output: "s" }
  )pb");
  const Liveness l = Live(g);
  const std::vector<ValueId> x = g.FindVersions("x");
  EXPECT_EQ(l.alias_root[x[1]], x[0]);
  EXPECT_EQ(Range(l, x[1]), std::make_pair(0, 2));
}

TEST(LivenessTest, StaticValuesAreExcludedUnlessPlanned) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    external_input: "w"
    op { type: "FC" input: "x" input: "w" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    value_info { name: "w" role: ROLE_PARAM }
  )pb");
  const ValueId w = Id(g, "w");
  const Liveness excluded = Live(g);
  EXPECT_FALSE(excluded.planned[w]);
  EXPECT_TRUE(excluded.planned[Id(g, "x")]);
  EXPECT_THAT(LiveBytesPerStep(excluded, 1), ElementsAre(200, 300));  // x kept to the end

  LivenessOptions options;
  options.plan_static = true;
  const Liveness planned = Live(g, options);
  EXPECT_TRUE(planned.planned[w]);
  EXPECT_EQ(Range(planned, w), std::make_pair(0, 1));
  EXPECT_THAT(LiveBytesPerStep(planned, 1), ElementsAre(300, 400));
}

TEST(LivenessTest, LiveBytesPerStepAlignsEveryClass) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
  )pb", {{"x", 10}, {"a", 300}, {"b", 1}, {"c", 256}});
  LivenessOptions recycle;
  recycle.recycle_inputs = true;
  const Liveness l = Live(g, recycle);
  // Steps: x [0,0], a (class) [0,2], b [2,3], c [3,3].
  EXPECT_THAT(LiveBytesPerStep(l, 1), ElementsAre(310, 300, 301, 257));
  EXPECT_THAT(LiveBytesPerStep(l, 256), ElementsAre(768, 512, 768, 512));
}

TEST(LivenessTest, DeviceOfProducerOrFirstReader) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" device_option { device_type: 1 device_id: 1 } }
    op { type: "CopyGPUToCPU" input: "a" output: "b" }
  )pb");
  const Liveness l = Live(g);
  EXPECT_EQ(l.device[Id(g, "x")], (graph::Device{1, 1}));
  EXPECT_EQ(l.device[Id(g, "a")], (graph::Device{1, 1}));
  EXPECT_EQ(l.device[Id(g, "b")], graph::Device{});
}

TEST(LivenessTest, InPlaceAcrossDevicesIsAnError) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { name: "gpu" type: "Relu" input: "a" output: "a" device_option { device_type: 1 } }
  )pb");
  absl::StatusOr<Liveness> l = ComputeLiveness(g, *MakeSchedule(g, OrderKind::kGiven));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("'gpu'"));
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("cuda:0"));
}

TEST(LivenessTest, UntypedValueIsAFailedPrecondition) {
  absl::StatusOr<Graph> g = GraphFromText(R"pb(
    external_input: "x" op { type: "Relu" input: "x" output: "y" })pb");
  ASSERT_TRUE(g.ok());
  absl::StatusOr<Liveness> l = ComputeLiveness(*g, *MakeSchedule(*g, OrderKind::kGiven));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("'x'"));
}

TEST(LivenessTest, InvalidScheduleIsRejected) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
  )pb");
  Schedule s;
  s.ops = {1, 0};
  s.step_of_op = {1, 0};
  EXPECT_EQ(ComputeLiveness(g, s).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LivenessTest, NetWithoutOps) {
  graph::GraphBuilder b("empty");
  b.AddExternalInput("x");
  b.AddExternalOutput("x");
  absl::StatusOr<Graph> g = std::move(b).Build();
  ASSERT_TRUE(g.ok()) << g.status();
  AssignByteTypes(*g, {}, 10);
  const Liveness l = Live(*g);
  EXPECT_EQ(l.num_steps, 0);
  EXPECT_TRUE(LiveBytesPerStep(l, 256).empty());
}

bool ViewsAvailable() {
  const graph::OpSchema* s = graph::OpSchemaTable::Builtin().Find("Identity");
  return s != nullptr && s->view_capable;
}

TEST(LivenessTest, ViewsAliasTheirInputWhenEnabled) {
  if (!ViewsAvailable()) GTEST_SKIP() << "no view-capable Identity schema";
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Identity" input: "a" output: "v" view: true }
    op { type: "Identity" input: "a" output: "not_marked" }
    op { type: "Sum" input: "v" input: "not_marked" output: "s" }
  )pb");
  const ValueId a = Id(g, "a");
  const ValueId v = Id(g, "v");
  EXPECT_EQ(Live(g).alias_root[v], v);  // views off
  LivenessOptions options;
  options.views = true;
  const Liveness l = Live(g, options);
  EXPECT_EQ(l.alias_root[v], a);
  EXPECT_THAT(l.members[a], ElementsAre(a, v));
  EXPECT_EQ(Range(l, a), std::make_pair(0, 3));
  EXPECT_EQ(l.alias_root[Id(g, "not_marked")], Id(g, "not_marked"));
}

TEST(LivenessTest, UnsafeViewsGetMemoryOfTheirOwn) {
  if (!ViewsAvailable()) GTEST_SKIP() << "no view-capable Identity schema";
  // 'big' is larger than its input; 'w' is overwritten in place later; 'u' views a value that
  // is overwritten in place later.
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Identity" input: "a" output: "big" view: true }
    op { type: "Identity" input: "a" output: "w" view: true }
    op { type: "Relu" input: "w" output: "w" }
    op { type: "Relu" input: "x" output: "c" }
    op { type: "Identity" input: "c" output: "u" view: true }
    op { type: "Relu" input: "c" output: "c" }
    op { type: "Sum" input: "u" input: "big" input: "w" input: "c" output: "s" }
  )pb", {{"big", 1000}});
  LivenessOptions options;
  options.views = true;
  const Liveness l = Live(g, options);
  EXPECT_EQ(l.alias_root[Id(g, "big")], Id(g, "big"));
  const ValueId w0 = g.FindVersions("w")[0];
  EXPECT_EQ(l.alias_root[w0], w0);
  EXPECT_EQ(l.alias_root[Id(g, "u")], Id(g, "u"));
}

LivenessOptions InPlace() {
  LivenessOptions options;
  options.in_place = true;
  return options;
}

// Relu -> Sigmoid -> Add: each output takes the bytes of the input dying at its op; an input
// read later (b at step 2), the caller's input (x) and an op outside the table keep theirs.
TEST(LivenessTest, InPlaceReuseJoinsAnOutputToTheInputDyingAtItsOp) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Sigmoid" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    op { type: "Add" input: "b" input: "c" output: "d" }
    op { type: "MatMul" input: "d" input: "d" output: "e" }
    op { type: "Relu" input: "e" output: "f" }
    external_output: "f"
  )pb");
  const ValueId x = Id(g, "x"), a = Id(g, "a"), b = Id(g, "b"), c = Id(g, "c");
  const ValueId d = Id(g, "d"), e = Id(g, "e"), f = Id(g, "f");
  const Liveness off = Live(g);
  for (ValueId v : {x, a, b, c, d, e, f}) EXPECT_EQ(off.alias_root[v], v);
  const Liveness l = Live(g, InPlace());
  EXPECT_EQ(l.alias_root[x], x);                  // the caller's: never overwritten
  EXPECT_THAT(l.members[a], ElementsAre(a, b, d));  // d takes b (slot 0), the first allowed
  EXPECT_EQ(l.alias_root[c], c);                  // b is read again at step 3
  EXPECT_EQ(l.alias_root[e], e);                  // MatMul does not compute in place
  EXPECT_THAT(l.members[e], ElementsAre(e, f));   // a graph output may take a dying input
  EXPECT_EQ(Range(l, a), std::make_pair(0, 4));
  EXPECT_EQ(Range(l, e), std::make_pair(4, 5));
  // The pair counts once: 5 classes of 100 bytes, at most x, {a,b,d} and c live at once.
  const std::vector<int64_t> with = LiveBytesPerStep(l, 1);
  const std::vector<int64_t> without = LiveBytesPerStep(off, 1);
  EXPECT_EQ(*std::max_element(with.begin(), with.end()), 300);
  EXPECT_EQ(*std::max_element(without.begin(), without.end()), 400);
}

// What must not be overwritten stays apart: an output read after the net, a parameter, a
// value of another size, an input read beside its own view, a value whose class an in-place
// write already started earlier.
TEST(LivenessTest, InPlaceReuseKeepsWhatMustSurvive) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    external_input: "w"
    value_info { name: "w" role: ROLE_PARAM }
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "y" }
    op { type: "Relu" input: "y" output: "z" }
    op { type: "Relu" input: "w" output: "p" }
    op { type: "Relu" input: "p" output: "big" }
    op { type: "Relu" input: "x" output: "s" }
    op { type: "Identity" input: "s" output: "sv" view: true }
    op { type: "Mul" input: "s" input: "sv" output: "m" }
    op { type: "Sum" input: "z" input: "big" input: "m" output: "out" }
    external_output: "y"
    external_output: "out"
  )pb", {{"big", 300}});
  const Graph& typed = g;
  LivenessOptions options = InPlace();
  options.views = true;
  const Liveness l = Live(typed, options);
  EXPECT_EQ(l.alias_root[Id(typed, "z")], Id(typed, "z"));      // y is a graph output
  EXPECT_EQ(l.alias_root[Id(typed, "p")], Id(typed, "p"));      // w is a parameter
  EXPECT_EQ(l.alias_root[Id(typed, "big")], Id(typed, "big"));  // 300 bytes over 100
  EXPECT_EQ(l.alias_root[Id(typed, "m")], Id(typed, "m"));      // s is read beside its view
  EXPECT_EQ(l.alias_root[Id(typed, "sv")], Id(typed, "s"));
  EXPECT_EQ(l.alias_root[Id(typed, "a")], Id(typed, "a"));
  EXPECT_EQ(l.alias_root[Id(typed, "y")], Id(typed, "a"));      // a dies at y's op
}

// Found by review: with recycled inputs, a class holding a graph input (written in place by
// name) starts before step 0 and takes no dying input; a planned weight is read by the next
// run and is never taken; an input whose class an output of the same op also writes is not
// taken (both outputs would land on it).
TEST(LivenessTest, InPlaceReuseLeavesFedClassesWeightsAndCoWrittenInputsAlone) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    external_input: "t"
    external_input: "w"
    value_info { name: "w" role: ROLE_PARAM }
    op { type: "Add" input: "x" input: "t" output: "x" }
    op { type: "Mul" input: "w" input: "x" output: "y" }
    op { type: "Dropout" input: "y" output: "z" output: "y" }
    op { type: "Relu" input: "z" output: "out" }
    external_output: "out"
  )pb");
  LivenessOptions options = InPlace();
  options.recycle_inputs = true;
  options.plan_static = true;
  const Liveness l = Live(g, options);
  const std::vector<ValueId> x = g.FindVersions("x");
  const std::vector<ValueId> y = g.FindVersions("y");
  ASSERT_EQ(x.size(), 2u);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(l.alias_root[Id(g, "t")], Id(g, "t"));  // x's class is fed before step 0
  EXPECT_EQ(l.alias_root[Id(g, "w")], Id(g, "w"));  // the weight survives: y took x@1
  EXPECT_EQ(l.alias_root[y[0]], x[0]);
  EXPECT_EQ(l.alias_root[Id(g, "z")], Id(g, "z"));  // y's class is Dropout's mask too
}

// Node positions name the slots of the recurrent gradients only: a ScatterElements carrying
// onnx_input_slots still writes over its input 0 (its kernel reads by index), an LSTMGradient
// writes dW over W and dR over R at their positions, and one value read as both W and R is
// taken by neither gradient (the other read would see the gradient's bytes).
TEST(LivenessTest, InPlaceSlotsAreNodePositionsOnlyForTheRecurrentGradients) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "d" }
    op { type: "Relu" input: "x" output: "i" }
    op { type: "Relu" input: "x" output: "u" }
    op { type: "ScatterElements" input: "d" input: "i" input: "u" output: "s"
         arg { name: "onnx_input_slots" ints: 1 ints: 2 ints: 0 } }
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "x" output: "w" }
    op { type: "Relu" input: "x" output: "r" }
    op { type: "Relu" input: "x" output: "y" }
    op { type: "LSTMGradient" input: "a" input: "w" input: "r" input: "y" input: "s"
         output: "dw" output: "dr"
         arg { name: "onnx_input_slots" ints: 0 ints: 1 ints: 2 ints: 8 ints: 9 }
         arg { name: "onnx_output_slots" ints: 1 ints: 2 } }
    op { type: "Relu" input: "x" output: "a2" }
    op { type: "Relu" input: "x" output: "t" }
    op { type: "Relu" input: "x" output: "y2" }
    op { type: "Relu" input: "x" output: "z2" }
    op { type: "LSTMGradient" input: "a2" input: "t" input: "t" input: "y2" input: "z2"
         output: "dt" output: "dt2"
         arg { name: "onnx_input_slots" ints: 0 ints: 1 ints: 2 ints: 8 ints: 9 }
         arg { name: "onnx_output_slots" ints: 1 ints: 2 } }
    op { type: "Sum" input: "dw" input: "dr" input: "dt" input: "dt2" output: "out" }
    external_output: "out"
  )pb");
  const Liveness l = Live(g, InPlace());
  EXPECT_EQ(l.alias_root[Id(g, "s")], Id(g, "d"));
  EXPECT_EQ(l.alias_root[Id(g, "u")], Id(g, "u"));
  EXPECT_EQ(l.alias_root[Id(g, "dw")], Id(g, "w"));
  EXPECT_EQ(l.alias_root[Id(g, "dr")], Id(g, "r"));
  EXPECT_EQ(l.alias_root[Id(g, "a")], Id(g, "a"));  // dX is not asked for
  EXPECT_EQ(l.alias_root[Id(g, "dt")], Id(g, "dt"));
  EXPECT_EQ(l.alias_root[Id(g, "dt2")], Id(g, "dt2"));
  EXPECT_EQ(l.alias_root[Id(g, "t")], Id(g, "t"));
}

// Which pairs join depends on the order: in the given order a dies at c's op; run b's op
// after c's and a lives on past it.
TEST(LivenessTest, InPlaceReuseFollowsTheSchedule) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "a" output: "c" }
    op { type: "Sum" input: "b" input: "c" output: "s" }
  )pb");
  const ValueId a = Id(g, "a"), b = Id(g, "b"), c = Id(g, "c");
  Schedule given = Given(g);
  absl::StatusOr<Liveness> l = ComputeLiveness(g, given, InPlace());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->alias_root[c], a);
  EXPECT_EQ(l->alias_root[b], b);
  EXPECT_EQ(l->alias_root[Id(g, "s")], b);  // Sum may take any input: b, in slot 0
  Schedule swapped = given;
  std::swap(swapped.ops[1], swapped.ops[2]);
  l = ComputeLiveness(g, swapped, InPlace());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->alias_root[b], a);
  EXPECT_EQ(l->alias_root[c], c);
  EXPECT_EQ(l->alias_root[Id(g, "s")], a);  // b, now in a's class
}

TEST(HappensBeforeTest, ParallelBranchesJoinedBySum) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a1" }
    op { type: "Relu" input: "a1" output: "a2" }
    op { type: "Relu" input: "x" output: "b1" }
    op { type: "Relu" input: "b1" output: "b2" }
    op { type: "Sum" input: "a2" input: "b2" output: "s" }
  )pb");
  const HappensBefore hb(g);
  EXPECT_TRUE(hb.Before(0, 1));
  EXPECT_TRUE(hb.Before(0, 4));
  EXPECT_TRUE(hb.Before(3, 4));
  EXPECT_FALSE(hb.Before(0, 2));
  EXPECT_FALSE(hb.Before(0, 3));
  EXPECT_FALSE(hb.Before(1, 2));
  EXPECT_FALSE(hb.Before(2, 1));
  EXPECT_FALSE(hb.Before(4, 0));
  EXPECT_FALSE(hb.Before(2, 2));
  EXPECT_TRUE(hb.Before(2, 4));
  EXPECT_FALSE(hb.Before(2, 1));
}

TEST(HappensBeforeTest, InPlaceAndControlEdgesOrderOps) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { name: "reader" type: "Relu" input: "a" output: "b" }
    op { name: "inplace" type: "Relu" input: "a" output: "a" }
    op { type: "Relu" input: "x" output: "c" control_input: "b" }
  )pb");
  const HappensBefore hb(g);
  EXPECT_TRUE(hb.Before(1, 2));
  EXPECT_TRUE(hb.Before(1, 3));
  EXPECT_FALSE(hb.Before(2, 3));
}

// Reachability by breadth-first search from every op, the oracle.
std::vector<std::vector<bool>> Reachability(const Graph& g) {
  const std::vector<std::vector<OpId>> succ = OpSuccessors(g);
  std::vector<std::vector<bool>> reach(g.num_ops(), std::vector<bool>(g.num_ops(), false));
  for (OpId a = 0; a < g.num_ops(); ++a) {
    std::deque<OpId> queue(succ[a].begin(), succ[a].end());
    while (!queue.empty()) {
      const OpId u = queue.front();
      queue.pop_front();
      if (reach[a][u]) continue;
      reach[a][u] = true;
      queue.insert(queue.end(), succ[u].begin(), succ[u].end());
    }
  }
  return reach;
}

TEST(HappensBeforeTest, MatchesReachabilityOnRandomGraphs) {
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions options;
    options.num_ops = 10 + static_cast<int>(seed % 40);
    options.control_input_probability = 0.1;
    const Graph g = testing::RandomGraph(seed, options);
    const std::vector<std::vector<bool>> reach = Reachability(g);
    const HappensBefore hb(g);
    // Queries in a scrambled order exercise the resumed searches.
    for (int k = 0; k < g.num_ops() * g.num_ops(); ++k) {
      const OpId a = static_cast<OpId>((k * 7919) % g.num_ops());
      const OpId b = static_cast<OpId>((k * 104729 + k / g.num_ops()) % g.num_ops());
      ASSERT_EQ(hb.Before(a, b), reach[a][b] && a != b) << a << " -> " << b;
    }
    for (OpId a = 0; a < g.num_ops(); ++a) {
      for (OpId b = g.num_ops() - 1; b >= 0; --b) {
        ASSERT_EQ(hb.Before(a, b), reach[a][b] && a != b) << a << " -> " << b;
      }
    }
  }
}

TEST(LivenessPropertyTest, ClassesAreConsistentOnRandomGraphs) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions options;
    options.num_ops = 5 + static_cast<int>(seed % 50);
    options.inplace_probability = 0.3;
    options.view_probability = 0.1;
    const Graph g = testing::RandomGraph(seed, options);
    LivenessOptions lo;
    lo.views = seed % 2 == 0;
    const Liveness l = Live(g, lo, seed % 3 == 0 ? OrderKind::kLongestPath : OrderKind::kGiven);
    for (ValueId v = 0; v < g.num_values(); ++v) {
      const ValueId root = l.alias_root[v];
      ASSERT_NE(root, graph::kNone);
      EXPECT_EQ(l.alias_root[root], root);
      EXPECT_LE(l.bytes[v], l.class_bytes[root]);
      EXPECT_EQ(l.lifetime[v].first_step, l.lifetime[root].first_step);
      EXPECT_EQ(l.lifetime[v].last_step, l.lifetime[root].last_step);
      EXPECT_LE(l.lifetime[v].first_step, l.lifetime[v].last_step);
      if (g.value(v).inplace_of != graph::kNone) {
        EXPECT_EQ(root, l.alias_root[g.value(v).inplace_of]);
      }
      for (OpId reader : g.consumers(v)) {
        EXPECT_LE(l.schedule.step_of_op[reader], l.lifetime[v].last_step);
      }
      if (g.value(v).producer != graph::kNone) {
        EXPECT_GE(l.schedule.step_of_op[g.value(v).producer], l.lifetime[v].first_step);
      }
    }
    // Each class's members at its root, oldest first (graph inputs, then by producer step,
    // ties by id), each value listed once; nothing at other values.
    auto step_of = [&](ValueId v) {
      const OpId p = g.value(v).producer;
      return std::make_pair(p == graph::kNone ? -1 : l.schedule.step_of_op[p], v);
    };
    std::vector<int> listed(g.num_values(), 0);
    for (ValueId v = 0; v < g.num_values(); ++v) {
      if (l.alias_root[v] != v) {
        EXPECT_TRUE(l.members[v].empty());
        continue;
      }
      ASSERT_FALSE(l.members[v].empty());
      EXPECT_EQ(l.members[v].front(), v);
      for (size_t k = 0; k < l.members[v].size(); ++k) {
        const ValueId m = l.members[v][k];
        EXPECT_EQ(l.alias_root[m], v);
        ++listed[m];
        if (k > 0) {
          EXPECT_LT(step_of(l.members[v][k - 1]), step_of(m));
        }
      }
    }
    EXPECT_THAT(listed, Each(1));
  }
}

}  // namespace
}  // namespace memonger
