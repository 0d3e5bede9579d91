#include "report/model_summary.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using ::testing::ElementsAre;

// Inputs of 4, 8, 8, 2 and 8 floats, each copied by a Relu: the copies have the same sizes.
// The largest values are by bytes, descending, ties by id; --top cuts the list, whatever its
// length, without changing its order.
TEST(ModelSummaryTest, LargestValuesByBytesThenId) {
  std::string text = "name: \"t\"\n";
  const int sizes[] = {4, 8, 8, 2, 8};
  for (int i = 0; i < 5; ++i) {
    const std::string in = "in" + std::to_string(i);
    text += "external_input: \"" + in + "\"\n";
    text += "value_info { name: \"" + in + "\" dtype: FLOAT has_shape: true dim { size: " +
            std::to_string(sizes[i]) + " } }\n";
    text += "op { type: \"Relu\" input: \"" + in + "\" output: \"out" + std::to_string(i) +
            "\" }\n";
  }
  absl::StatusOr<graph::Graph> g = testing::GraphFromText(text);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::InferShapes(*g, {}).ok());
  auto id = [&](const std::string& name) { return *g->FindValue(name); };

  absl::StatusOr<ModelSummary> all = SummarizeModel(*g, "t", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->largest_values.size(), 10u);
  for (size_t i = 1; i < all->largest_values.size(); ++i) {
    const graph::ValueId a = all->largest_values[i - 1];
    const graph::ValueId b = all->largest_values[i];
    const int64_t bytes_a = *graph::ValueByteSize(g->value(a));
    const int64_t bytes_b = *graph::ValueByteSize(g->value(b));
    EXPECT_TRUE(bytes_a > bytes_b || (bytes_a == bytes_b && a < b)) << i;
  }
  for (int top = 0; top <= 10; ++top) {
    absl::StatusOr<ModelSummary> cut = SummarizeModel(*g, "t", top);
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_EQ(cut->largest_values,
              std::vector<graph::ValueId>(all->largest_values.begin(),
                                          all->largest_values.begin() + top));
  }
  absl::StatusOr<ModelSummary> three = SummarizeModel(*g, "t", 3);
  ASSERT_TRUE(three.ok());
  // Six values of 32 bytes: the three with the lowest ids.
  std::vector<graph::ValueId> of_eight = {id("in1"), id("in2"), id("in4"), id("out1"),
                                          id("out2"), id("out4")};
  std::sort(of_eight.begin(), of_eight.end());
  EXPECT_THAT(three->largest_values, ElementsAre(of_eight[0], of_eight[1], of_eight[2]));
}

}  // namespace
}  // namespace memonger
