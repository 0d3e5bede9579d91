#include "graph/dependencies.h"

#include <optional>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger::graph {
namespace {

using ::memonger::testing::GraphFromText;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::Pair;

// Data, control and in-place dependencies, each once, ascending.
TEST(DependenciesTest, SuccessorsOfEveryKind) {
  auto g = GraphFromText(R"pb(
    external_input: "x"
    op { name: "a" type: "Relu" input: "x" output: "a" }
    op { name: "reader" type: "Add" input: "a" input: "a" output: "s" }
    op { name: "ctl" type: "Relu" input: "x" output: "c" control_input: "s" }
    op { name: "inplace" type: "Relu" input: "a" output: "a" }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  // a -> reader (read twice: one edge), a -> inplace (data); reader -> ctl (control);
  // reader -> inplace (inplace overwrites what reader reads).
  EXPECT_THAT(OpSuccessors(*g), ElementsAre(ElementsAre(1, 3), ElementsAre(2, 3), IsEmpty(),
                                            IsEmpty()));
  std::vector<std::pair<OpId, DependencyKind>> of_inplace;
  ForEachPredecessor(*g, 3, [&](OpId pred, DependencyKind kind, ValueId) {
    of_inplace.emplace_back(pred, kind);
  });
  EXPECT_THAT(of_inplace, ElementsAre(Pair(0, DependencyKind::kData),
                                      Pair(1, DependencyKind::kInPlace)));
}

TEST(DependenciesTest, SmallestIndexOrderIsProgramOrderWhereValid) {
  EXPECT_THAT(SmallestIndexOrder({{1, 2}, {2}, {}}), ElementsAre(0, 1, 2));
  // 2 must run before 0; among ready ops the smallest index goes first.
  EXPECT_THAT(SmallestIndexOrder({{}, {}, {0}}), ElementsAre(1, 2, 0));
  EXPECT_THAT(SmallestIndexOrder({}), IsEmpty());
}

TEST(DependenciesTest, CyclesAreLeftOutAndFound) {
  // 0 -> 1 -> 2 -> 1, and 3 after 2.
  const std::vector<std::vector<OpId>> cyclic = {{1}, {2}, {1, 3}, {}};
  EXPECT_THAT(SmallestIndexOrder(cyclic), ElementsAre(0));
  EXPECT_THAT(FindCycleEdge(cyclic), Optional(Pair(2, 1)));
  EXPECT_THAT(FindCycleEdge({{0}}), Optional(Pair(0, 0)));
  EXPECT_EQ(FindCycleEdge({{1, 2}, {2}, {}}), std::nullopt);
  // A chain deeper than any call stack: the search keeps its own stack.
  std::vector<std::vector<OpId>> chain(1 << 20);
  for (OpId i = 0; i + 1 < static_cast<OpId>(chain.size()); ++i) chain[i] = {i + 1};
  EXPECT_EQ(FindCycleEdge(chain), std::nullopt);
  chain.back() = {0};
  EXPECT_THAT(FindCycleEdge(chain), Optional(Pair(static_cast<OpId>(chain.size()) - 1, 0)));
}

TEST(DependenciesTest, CopyGpuToCpuWritesHostMemory) {
  const Device gpu{1, 0};
  EXPECT_EQ(OutputDevice("CopyGPUToCPU", gpu), Device{});
  EXPECT_EQ(OutputDevice("Relu", gpu), gpu);
}

}  // namespace
}  // namespace memonger::graph
