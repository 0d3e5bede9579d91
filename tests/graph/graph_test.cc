#include "graph/graph.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger::graph {
namespace {

using ::memonger::testing::GraphFromText;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(GraphTest, SsaVersionsAndInPlace) {
  auto g = GraphFromText(R"pb(
    name: "t"
    external_input: "x"
    op { type: "Relu" input: "x" output: "y" }
    op { type: "Relu" input: "y" output: "y" }
    op { type: "Relu" input: "x" output: "y" }
    external_output: "y"
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<ValueId> ys = g->FindVersions("y");
  ASSERT_EQ(ys.size(), 3u);
  EXPECT_EQ(g->value(ys[1]).inplace_of, ys[0]);   // read and written: in place
  EXPECT_EQ(g->value(ys[2]).inplace_of, kNone);   // written again without reading: new value
  EXPECT_EQ(g->value(ys[2]).version, 2);
  EXPECT_EQ(g->value(ys[2]).role, Role::kOutput);
  EXPECT_EQ(g->value(ys[0]).role, Role::kActivation);
  EXPECT_EQ(g->outputs(), std::vector<ValueId>{ys[2]});
}

// The name index views the values' own names: a copy must index its own, and keep answering
// after the original is gone; a move keeps the index valid.
TEST(GraphTest, CopiesAndMovesKeepTheirNameIndex) {
  // Names longer than a short string's inline buffer live on the heap: a dangling view of the
  // original's names would show under ASan.
  const std::string x = "an_input_with_a_long_name";
  const std::string y = "an_output_with_a_long_name";
  std::optional<Graph> copy;
  Graph assigned;
  {
    auto g = GraphFromText(absl::StrCat(R"pb(
      name: "t"
      external_input: ")pb", x, R"pb("
      op { type: "Relu" input: ")pb", x, R"pb(" output: ")pb", y, R"pb(" }
      op { type: "Relu" input: ")pb", y, R"pb(" output: ")pb", y, R"pb(" }
      external_output: ")pb", y, R"pb(")pb"));
    ASSERT_TRUE(g.ok()) << g.status();
    copy.emplace(*g);
    assigned = *g;
    Graph moved = *std::move(g);
    EXPECT_EQ(moved.FindVersions(y).size(), 2u);
  }
  for (const Graph* graph : {&*copy, &assigned}) {
    ASSERT_EQ(graph->FindVersions(y).size(), 2u);
    EXPECT_EQ(graph->FindValue(y), graph->FindVersions(y).back());
    EXPECT_EQ(graph->value(*graph->FindValue(x)).name, x);
    EXPECT_EQ(graph->Versions(y).size(), 2u);
    EXPECT_FALSE(graph->FindValue("missing").has_value());
    EXPECT_THAT(graph->consumers(*graph->FindValue(x)), ElementsAre(0));
  }
}

// A value's readers: each op once (an op reading it twice included), ascending, whatever order
// the net lists them in; a control input is no read; an unread value has none.
TEST(GraphTest, ConsumersAreEachReadingOpOnceAscending) {
  auto g = GraphFromText(R"pb(
    name: "t"
    external_input: "x"
    op { type: "Add" input: "x" input: "x" output: "a" }
    op { type: "Relu" input: "b" output: "c" }
    op { type: "Mul" input: "a" input: "x" output: "b" control_input: "x" }
    op { type: "Relu" input: "x" output: "unread" control_input: "a" }
    external_output: "c"
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->consumers(*g->FindValue("x")), ElementsAre(0, 2, 3));
  EXPECT_THAT(g->consumers(*g->FindValue("a")), ElementsAre(2));
  EXPECT_THAT(g->consumers(*g->FindValue("b")), ElementsAre(1));
  EXPECT_TRUE(g->consumers(*g->FindValue("unread")).empty());
  EXPECT_TRUE(g->consumers(*g->FindValue("c")).empty());
  const Graph copy = *g;
  for (ValueId v = 0; v < g->num_values(); ++v) EXPECT_EQ(copy.consumers(v), g->consumers(v));
}

TEST(GraphTest, UndefinedInputNamesOpAndValue) {
  auto g = GraphFromText(R"pb(
    external_input: "x"
    op { name: "r" type: "Relu" input: "missing" output: "y" }
  )pb");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("'r'"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("'missing'"));
}

TEST(GraphTest, CycleNamesAValue) {
  auto g = GraphFromText(R"pb(
    external_input: "x"
    op { name: "a" type: "Add" input: "x" input: "b_out" output: "a_out" }
    op { name: "b" type: "Relu" input: "a_out" output: "b_out" }
  )pb");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("cycle"));
  EXPECT_THAT(std::string(g.status().message()), ::testing::AnyOf(HasSubstr("a_out"), HasSubstr("b_out")));
}

// An op that waits for its own output (a control input naming it) is a cycle of one op.
TEST(GraphTest, AnOpWaitingForItsOwnOutputIsACycle) {
  auto g = GraphFromText(R"pb(
    external_input: "x"
    op { name: "r" type: "Relu" input: "x" output: "y" control_input: "y" }
  )pb");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("cycle: value 'y'"));
}

TEST(GraphTest, OutOfOrderNetGetsTopologicalOrder) {
  auto g = GraphFromText(R"pb(
    external_input: "x"
    op { name: "second" type: "Relu" input: "h" output: "y" }
    op { name: "first" type: "Relu" input: "x" output: "h" }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->TopologicalOrder(), (std::vector<OpId>{1, 0}));
}

TEST(GraphTest, OutputWrittenTwiceByOneOp) {
  auto g = GraphFromText(R"pb(
    external_input: "x"
    op { name: "s" type: "Split" input: "x" output: "y" output: "y" }
  )pb");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("writes output 'y' twice"));
}

TEST(GraphTest, EmptyNames) {
  EXPECT_FALSE(GraphFromText(R"pb(op { type: "Relu" input: "" output: "y" })pb").ok());
  EXPECT_FALSE(GraphFromText(R"pb(external_input: "x" op { type: "" input: "x" output: "y" })pb").ok());
}

TEST(GraphTest, InPlaceWriteWaitsForOtherReaders) {
  // 'c' reads x@0 and is listed after the in-place op only through a forward reference; the
  // in-place write must still be ordered after every reader of the memory it overwrites.
  auto g = GraphFromText(R"pb(
    external_input: "x"
    op { name: "copy" type: "Copy" input: "x" output: "x2" }
    op { name: "inplace" type: "Relu" input: "x2" output: "x2" }
    op { name: "reader" type: "Relu" input: "x2" output: "z" }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->TopologicalOrder(), (std::vector<OpId>{0, 1, 2}));
}

TEST(GraphTest, RolesFromDeclarationsAndGradientOps) {
  auto g = GraphFromText(R"pb(
    external_input: "x"
    external_input: "w"
    op { type: "FC" input: "x" input: "w" input: "b" output: "y" }
    op { type: "FCGradient" input: "x" input: "w" input: "y" output: "dw" output: "db" output: "dx" }
    external_input: "b"
    value_info { name: "w" role: ROLE_PARAM }
    value_info { name: "b" role: ROLE_PARAM }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->value(*g->FindValue("w")).role, Role::kParam);
  EXPECT_EQ(g->value(*g->FindValue("x")).role, Role::kInput);
  EXPECT_EQ(g->value(*g->FindValue("y")).role, Role::kActivation);
  EXPECT_EQ(g->value(*g->FindValue("dw")).role, Role::kGradient);
}

// The builder holds every op's names in one buffer, walked in the order they were added (inputs,
// outputs, control inputs). Ops wider than the linear scans' 16 names take the hash paths; a
// control input written only later is resolved in pass 2; what a net says of a name (its
// declaration, alignment and role) reaches every version of it.
TEST(GraphTest, WideOpsLateControlInputsAndFactsOnEveryVersion) {
  GraphBuilder b("wide");
  OpSpec wide;
  wide.type = "Concat";
  for (int i = 0; i < 20; ++i) {
    b.AddExternalInput(absl::StrCat("in", i));
    wide.inputs.push_back(absl::StrCat("in", i));
  }
  for (int i = 0; i < 18; ++i) wide.outputs.push_back(absl::StrCat("out", i));
  wide.outputs.push_back("in7");  // in place over the eighth input
  wide.control_inputs = {"late"};
  b.AddOp(wide);
  OpSpec relu;
  relu.type = "Relu";
  relu.inputs = {"in7"};
  relu.outputs = {"in7"};  // a second in-place version
  b.AddOp(relu);
  OpSpec writer;
  writer.type = "Relu";
  writer.inputs = {"in0"};
  writer.outputs = {"late"};  // listed after its reader: the net is not in dependency order
  b.AddOp(writer);
  b.Declare("in7", Declaration{DataType::kFloat32, DeclaredDims{{4, ""}}}, 64);
  b.DeclareRole("in7", Role::kInput);
  b.Declare("in7", Declaration{DataType::kFloat32, DeclaredDims{{8, ""}}});
  b.AddExternalOutput("in7");
  absl::StatusOr<Graph> g = std::move(b).Build();
  ASSERT_TRUE(g.ok()) << g.status();

  const Op& op = g->op(0);
  ASSERT_EQ(op.inputs.size(), 20u);
  ASSERT_EQ(op.outputs.size(), 19u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(g->value(op.inputs[i]).name, absl::StrCat("in", i));
  for (int i = 0; i < 18; ++i) EXPECT_EQ(g->value(op.outputs[i]).name, absl::StrCat("out", i));
  const Value& over = g->value(op.outputs[18]);
  EXPECT_EQ(over.name, "in7");
  EXPECT_EQ(over.inplace_of, op.inputs[7]);
  ASSERT_EQ(op.control_inputs.size(), 1u);
  EXPECT_EQ(g->value(op.control_inputs[0]).name, "late");
  EXPECT_EQ(g->value(op.control_inputs[0]).producer, 2);

  const std::vector<ValueId> versions = g->FindVersions("in7");
  ASSERT_EQ(versions.size(), 3u);
  for (ValueId id : versions) {
    const Value& v = g->value(id);
    SCOPED_TRACE(v.DisplayName());
    EXPECT_EQ(v.alignment, 64);  // kept when the second declaration gave none
    ASSERT_TRUE(v.declared.dims.has_value());
    EXPECT_EQ(v.declared.dims->front().size, 8);  // the last declaration wins
    EXPECT_EQ(v.role, Role::kInput);
    EXPECT_TRUE(v.role_declared);
  }
  // A name with no facts keeps the computed role and no declaration.
  const Value& out0 = g->value(*g->FindValue("out0"));
  EXPECT_EQ(out0.role, Role::kActivation);
  EXPECT_FALSE(out0.declared.dims.has_value());
  EXPECT_EQ(out0.alignment, 0);
}

}  // namespace
}  // namespace memonger::graph
