#include "graph/fp16_storage.h"

#include <string>

#include "gmock/gmock.h"
#include "graph/shape_inference.h"
#include "graph/tensor_type.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger::graph {
namespace {

using ::memonger::testing::GraphFromText;
using ::testing::HasSubstr;

// features (fp32) is produced once and read by two ops.
Graph Net() {
  absl::StatusOr<Graph> g = GraphFromText(R"pb(
    name: "cache"
    external_input: "x"
    external_input: "w"
    op { type: "MatMul" input: "x" input: "w" output: "features" name: "encode" }
    op { type: "Relu" input: "features" output: "a" name: "use1" }
    op { type: "Add" input: "a" input: "features" output: "b" name: "use2" }
    external_output: "b"
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 4 } dim { size: 8 } }
    value_info {
      name: "w" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 8 } dim { size: 8 }
    }
  )pb");
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(InferShapes(*g, ShapeBindings{}).ok());
  return *std::move(g);
}

std::string TypeOf(const Graph& g, const std::string& name) {
  const std::optional<ValueId> id = g.FindValue(name);
  return id.has_value() ? TensorTypeToString(*g.value(*id).type) : "absent";
}

TEST(Fp16StorageTest, CastsAfterTheProducerAndBeforeEachReader) {
  absl::StatusOr<Graph> g = StoreInFp16(Net(), {"features"});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> order;
  for (const Op& op : g->ops()) order.push_back(op.name + ":" + op.type);
  EXPECT_THAT(order, ::testing::ElementsAre("encode:MatMul", "features_fp16:Cast",
                                            "features_restored:Cast", "use1:Relu",
                                            "features_restored_1:Cast", "use2:Add"));
  EXPECT_EQ(TypeOf(*g, "features_fp16"), "float16[4,8]");
  EXPECT_EQ(TypeOf(*g, "features_restored"), "float32[4,8]");
  EXPECT_EQ(TypeOf(*g, "b"), "float32[4,8]");
  // The fp32 value now dies at the cast: only the half copy spans the readers.
  const absl::Span<const OpId> readers = g->consumers(*g->FindValue("features"));
  ASSERT_EQ(readers.size(), 1u);
  EXPECT_EQ(g->op(readers[0]).name, "features_fp16");
  EXPECT_EQ(g->value(*g->FindValue("w")).role, Role::kParam);
}

TEST(Fp16StorageTest, BadRequestsAreErrors) {
  const Graph g = Net();
  EXPECT_THAT(std::string(StoreInFp16(g, {"nope"}).status().message()), HasSubstr("no value 'nope'"));
  EXPECT_THAT(std::string(StoreInFp16(g, {"b"}).status().message()), HasSubstr("graph output"));
  EXPECT_THAT(std::string(StoreInFp16(g, {"a", "a"}).status().message()), HasSubstr("given twice"));
  absl::StatusOr<Graph> half = StoreInFp16(*StoreInFp16(g, {"features"}), {"features_fp16"});
  EXPECT_THAT(std::string(half.status().message()), HasSubstr("is float16"));
}

}  // namespace
}  // namespace memonger::graph
