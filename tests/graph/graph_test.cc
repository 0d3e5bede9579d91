#include "graph/graph.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger::graph {
namespace {

using ::memonger::testing::GraphFromText;
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
  }
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

}  // namespace
}  // namespace memonger::graph
