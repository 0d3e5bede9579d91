#include "graph/workloads.h"

#include <string>

#include "gmock/gmock.h"
#include "graph/tensor_type.h"
#include "gtest/gtest.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Graph> Build(const std::string& text) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec(text);
  if (!spec.ok()) return spec.status();
  return BuildWorkload(*spec);
}

// memonger's FC test net: layers x (FC, Relu), the prediction FC, Softmax, LabelCrossEntropy,
// AveragedLoss; the loss is declared and is the output.
TEST(WorkloadsTest, MlpIsMemongersFcNet) {
  absl::StatusOr<Graph> g = Build("mlp:layers=2,batch=4,dim=10,classes=8");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_ops(), 2 * 2 + 4);
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("relu1")).type), "float32[4,10]");
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("softmax")).type), "float32[4,8]");
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("loss")).type), "float32[]");
  ASSERT_EQ(g->losses().size(), 1u);
  EXPECT_EQ(g->value(g->losses()[0]).name, "loss");
  EXPECT_EQ(g->value(*g->FindValue("fc1_w")).role, Role::kParam);
}

TEST(WorkloadsTest, AttentionIsBuilt) {
  absl::StatusOr<Graph> g = Build("attention:n=15,heads=2,dim=8,mlp=16,depth=1");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->AllTypesKnown());
}

TEST(WorkloadsTest, UnknownKindsAndKeysAreErrors) {
  absl::StatusOr<Graph> unknown = Build("transformer:n=5");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("unknown workload 'transformer' (known: attention, mlp)"));
  absl::StatusOr<Graph> key = Build("mlp:width=5");
  ASSERT_FALSE(key.ok());
  EXPECT_THAT(std::string(key.status().message()), HasSubstr("unknown key 'width'"));
  absl::StatusOr<Graph> training = Build("mlp:mode=training");
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_EQ(training->param_grads().size(), 8u);
}

}  // namespace
}  // namespace memonger::graph
