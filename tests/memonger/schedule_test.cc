#include "memonger/schedule.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/memory_order.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::OpId;
using ::memonger::testing::GraphFromText;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Graph MustParse(const std::string& pbtxt) {
  absl::StatusOr<Graph> g = GraphFromText(pbtxt);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

std::vector<OpId> Order(const Graph& g, OrderKind order) {
  absl::StatusOr<Schedule> s = MakeSchedule(g, order);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  EXPECT_TRUE(CheckSchedule(g, s->ops).ok());
  for (int step = 0; step < static_cast<int>(s->ops.size()); ++step) {
    EXPECT_EQ(s->step_of_op[s->ops[step]], step);
  }
  EXPECT_EQ(s->order, order);
  return s->ops;
}

// memonger_test.py test_longest_path: edges (0,1), (1,3), (2,3).
constexpr char kLongestPathNet[] = R"pb(
  external_input: "conv0_w_comp"
  external_input: "data"
  external_input: "conv0_b"
  external_input: "conv2_w"
  external_input: "conv2_b"
  op { type: "Copy" input: "conv0_w_comp" output: "conv0_w" }
  op { type: "Conv" input: "data" input: "conv0_w" input: "conv0_b" output: "conv0" }
  op { type: "Copy" input: "conv2_w" output: "conv2_w" }
  op { type: "Conv" input: "conv0" input: "conv2_w" input: "conv2_b" output: "conv2" }
)pb";

TEST(OrderNameTest, RoundTripsAndRejectsUnknownNames) {
  for (OrderKind order : {OrderKind::kGiven, OrderKind::kTopological, OrderKind::kLongestPath,
                          OrderKind::kMemoryAware}) {
    absl::StatusOr<OrderKind> parsed = ParseOrder(OrderName(order));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, order);
  }
  EXPECT_EQ(OrderName(OrderKind::kLongestPath), "longest-path");
  absl::StatusOr<OrderKind> bad = ParseOrder("random");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'random'"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("given, topological, longest-path, memory-aware"));
}

// memory-aware needs types (the peak counts bytes): untyped, it says so.
TEST(ScheduleTest, MemoryAwareNeedsTypes) {
  Graph g = MustParse(R"pb(external_input: "x" op { type: "Relu" input: "x" output: "y" })pb");
  absl::StatusOr<MemoryOrder> s = FindMemoryAwareOrder(g, MemoryOrderOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
}

// The memory-aware order is a search with a plan's options, not one of MakeSchedule's rules.
TEST(ScheduleTest, MakeScheduleLeavesTheMemoryAwareOrderToItsSearch) {
  Graph g = MustParse(R"pb(external_input: "x" op { type: "Relu" input: "x" output: "y" })pb");
  absl::StatusOr<Schedule> s = MakeSchedule(g, OrderKind::kMemoryAware);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("FindMemoryAwareOrder"));
}

TEST(ScheduleTest, GivenIsTheGraphsDependencyOrder) {
  Graph g = MustParse(R"pb(
    external_input: "x"
    op { name: "second" type: "Relu" input: "h" output: "y" }
    op { name: "first" type: "Relu" input: "x" output: "h" }
  )pb");
  EXPECT_THAT(Order(g, OrderKind::kGiven), ElementsAre(1, 0));
}

TEST(ScheduleTest, TopologicalTakesTheReadyOpListedFirst) {
  Graph g = MustParse(R"pb(
    external_input: "x"
    op { name: "late" type: "Sum" input: "a" input: "b" output: "s" }
    op { name: "b" type: "Relu" input: "x" output: "b" }
    op { name: "a" type: "Relu" input: "x" output: "a" }
  )pb");
  EXPECT_THAT(Order(g, OrderKind::kTopological), ElementsAre(1, 2, 0));
}

// memonger_test.py scenario 14.
TEST(LongestPathTest, LongerChainFirst) {
  Graph g = MustParse(kLongestPathNet);
  EXPECT_THAT(Order(g, OrderKind::kLongestPath), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(OpSuccessors(g),
              ElementsAre(ElementsAre(1), ElementsAre(3), ElementsAre(3), ElementsAre()));
}

// Scenario 15: a second, disconnected chain 4 -> 5.
TEST(LongestPathTest, MultipleTargets) {
  std::string net = kLongestPathNet;
  net += R"pb(
    external_input: "data1"
    op { type: "Copy" input: "data1" output: "data2" }
    op { type: "Copy" input: "data2" output: "data3" }
  )pb";
  Graph g = MustParse(net);
  EXPECT_THAT(Order(g, OrderKind::kLongestPath), ElementsAre(0, 1, 2, 3, 4, 5));
}

// Scenario 16.
TEST(LongestPathTest, SingleNode) {
  Graph g = MustParse(R"pb(external_input: "x" op { type: "Copy" input: "x" output: "y" })pb");
  EXPECT_THAT(Order(g, OrderKind::kLongestPath), ElementsAre(0));
  EXPECT_THAT(Order(g, OrderKind::kTopological), ElementsAre(0));
}

TEST(LongestPathTest, EmptyNet) {
  graph::GraphBuilder b("empty");
  b.AddExternalInput("x");
  absl::StatusOr<Graph> g = std::move(b).Build();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Order(*g, OrderKind::kLongestPath).empty());
}

TEST(LongestPathTest, RunsTheLongerOfTwoIndependentChainsFirst) {
  Graph g = MustParse(R"pb(
    external_input: "x"
    external_input: "y"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "y" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    op { type: "Relu" input: "c" output: "d" }
  )pb");
  EXPECT_THAT(Order(g, OrderKind::kTopological), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Order(g, OrderKind::kLongestPath), ElementsAre(1, 2, 3, 0));
}

// Scenario 13's net: three in-place Copy ops on one value form a chain. Our dependency graph keeps
// the direct edges only; Caffe2's interference graph (every later reader: (0,1), (0,2), (1,2)) is
// asserted in tests/memonger/caffe2_exact_test.cc.
TEST(ScheduleTest, RepeatedInPlaceOpsFormAChain) {
  Graph g = MustParse(R"pb(
    external_input: "b1"
    op { type: "Copy" input: "b1" output: "b1" }
    op { type: "Copy" input: "b1" output: "b1" }
    op { type: "Copy" input: "b1" output: "b1" }
  )pb");
  EXPECT_THAT(OpSuccessors(g), ElementsAre(ElementsAre(1), ElementsAre(2), ElementsAre()));
  for (OrderKind order : {OrderKind::kGiven, OrderKind::kTopological, OrderKind::kLongestPath}) {
    EXPECT_THAT(Order(g, order), ElementsAre(0, 1, 2));
  }
}

// Op 2 overwrites 'a' in place while op 1 still reads it. Without the in-place ordering edge
// the longest-path order would run the long branch (2, 3, 4) before op 1.
constexpr char kInPlaceNet[] = R"pb(
  external_input: "x"
  op { name: "make" type: "Copy" input: "x" output: "a" }
  op { name: "reader" type: "Relu" input: "a" output: "b" }
  op { name: "inplace" type: "Relu" input: "a" output: "a" }
  op { type: "Relu" input: "a" output: "c" }
  op { type: "Relu" input: "c" output: "d" }
)pb";

TEST(ScheduleTest, InPlaceWriteWaitsForOtherReaders) {
  Graph g = MustParse(kInPlaceNet);
  EXPECT_THAT(OpSuccessors(g)[1], ElementsAre(2));
  for (OrderKind order : {OrderKind::kGiven, OrderKind::kTopological, OrderKind::kLongestPath}) {
    const std::vector<OpId> ops = Order(g, order);
    ASSERT_EQ(ops.size(), 5u);
    EXPECT_THAT(ops, ElementsAre(0, 1, 2, 3, 4)) << OrderName(order);
  }
  absl::Status s = CheckSchedule(g, {0, 2, 1, 3, 4});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'inplace'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("overwrites 'a' in place"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'reader'"));
}

struct BadScheduleCase {
  std::string label;
  std::vector<OpId> ops;
  std::string expected_message;
};

class CheckScheduleTest : public ::testing::TestWithParam<BadScheduleCase> {};

TEST_P(CheckScheduleTest, RejectsWithAMessage) {
  Graph g = MustParse(R"pb(
    external_input: "x"
    op { name: "p" type: "Relu" input: "x" output: "a" }
    op { name: "q" type: "Relu" input: "a" output: "b" }
    op { name: "r" type: "Relu" input: "x" output: "c" control_input: "b" }
  )pb");
  ASSERT_TRUE(CheckSchedule(g, {0, 1, 2}).ok());
  absl::Status s = CheckSchedule(g, GetParam().ops);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(GetParam().expected_message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CheckScheduleTest,
    ::testing::Values(
        BadScheduleCase{"too_short", /*ops=*/{0, 1}, /*expected_message=*/"lists 2 ops"},
        BadScheduleCase{"unknown_op", {0, 1, 7}, "op #7, which does not exist"},
        BadScheduleCase{"twice", {0, 1, 1}, "twice (steps 1 and 2)"},
        BadScheduleCase{"data", {1, 0, 2}, "Relu op 'q' (step 0), which reads 'a', before Relu op 'p'"},
        BadScheduleCase{"control", {0, 2, 1}, "which has control input 'b'"}),
    [](const ::testing::TestParamInfo<BadScheduleCase>& info) { return info.param.label; });

TEST(SchedulePropertyTest, EveryOrderIsValidOnRandomGraphs) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions options;
    options.num_ops = 5 + static_cast<int>(seed % 60);
    options.control_input_probability = 0.1;
    options.inplace_probability = 0.3;
    const Graph g = testing::RandomGraph(seed, options);
    for (OrderKind order : {OrderKind::kGiven, OrderKind::kTopological, OrderKind::kLongestPath}) {
      absl::StatusOr<Schedule> s = MakeSchedule(g, order);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_TRUE(CheckSchedule(g, s->ops).ok()) << CheckSchedule(g, s->ops);
    }
    absl::StatusOr<MemoryOrder> memory_aware = FindMemoryAwareOrder(g, MemoryOrderOptions{});
    ASSERT_TRUE(memory_aware.ok()) << memory_aware.status();
    EXPECT_TRUE(CheckSchedule(g, memory_aware->ops).ok()) << CheckSchedule(g, memory_aware->ops);
  }
}

}  // namespace
}  // namespace memonger
