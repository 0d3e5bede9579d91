#include "graph/gradient_builder.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "graph/shape_inference.h"
#include "graph/tensor_type.h"
#include "graph/workloads.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger::graph {
namespace {

using ::memonger::testing::GraphFromText;
using ::testing::HasSubstr;

Graph Workload(const std::string& text) {
  absl::StatusOr<Graph> g = BuildWorkload(*ParseWorkloadSpec(text));
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

std::map<std::string, int> OpCounts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Op& op : g.ops()) ++counts[op.type];
  return counts;
}

// memonger's FC net: the backward ops Caffe2's AddGradientOperators would add.
TEST(GradientBuilderTest, MlpGetsCaffe2sGradientOps) {
  const Graph forward = Workload("mlp:layers=2,batch=4,dim=10,classes=8");
  absl::StatusOr<Graph> g = AddGradientOps(forward, {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(HasGradientOps(*g));
  EXPECT_FALSE(HasGradientOps(forward));
  const std::map<std::string, int> counts = OpCounts(*g);
  EXPECT_EQ(counts.at("ConstantFill"), 1);
  EXPECT_EQ(counts.at("AveragedLossGradient"), 1);
  EXPECT_EQ(counts.at("LabelCrossEntropyGradient"), 1);
  EXPECT_EQ(counts.at("SoftmaxGradient"), 1);
  EXPECT_EQ(counts.at("FCGradient"), 3);
  EXPECT_EQ(counts.at("ReluGradient"), 2);
  EXPECT_EQ(g->num_ops(), forward.num_ops() + 1 + 1 + 1 + 1 + 3 + 2);
  // Every parameter has a gradient of its own type, declared, with role gradient.
  ASSERT_EQ(g->param_grads().size(), 6u);
  for (const auto& [param, grad] : g->param_grads()) {
    SCOPED_TRACE(g->value(param).name);
    EXPECT_EQ(g->value(param).role, Role::kParam);
    EXPECT_EQ(g->value(grad).role, Role::kGradient);
    EXPECT_EQ(*g->value(grad).type, *g->value(param).type);
  }
  // The first layer's input needs no gradient: its FCGradient computes dW and db only.
  for (const Op& op : g->ops()) {
    if (op.type == "FCGradient" && g->value(op.inputs[0]).name == "data") {
      EXPECT_EQ(op.outputs.size(), 2u);
    }
  }
}

// The attention block: saved statistics and lse are added to the forward ops, the residual
// fan-out is summed, and every gradient has its forward value's type.
TEST(GradientBuilderTest, AttentionTrainingNet) {
  for (const char* kernel : {"math", "efficient"}) {
    SCOPED_TRACE(kernel);
    const Graph g = Workload(absl::StrCat(
        "attention:n=15,heads=2,dim=8,mlp=16,depth=2,bias_dtype=fp16,mode=training,kernel=",
        kernel));
    const std::map<std::string, int> counts = OpCounts(g);
    EXPECT_EQ(counts.at("LayerNormalizationGradient"), 4);
    EXPECT_EQ(counts.at("GeluGradient"), 2);
    EXPECT_GE(counts.at("Sum"), 2);  // x feeds LayerNorm and the residual
    if (std::string(kernel) == "efficient") {
      EXPECT_EQ(counts.at("EfficientAttentionGradient"), 2);
      EXPECT_EQ(TensorTypeToString(*g.value(*g.FindValue("b0/attn_lse")).type),
                "float32[1,2,16]");
    } else {
      EXPECT_EQ(counts.at("SoftmaxGradient"), 2);
      EXPECT_EQ(counts.at("MatMulGradient"), 2 * 6);  // qk, pv, qkv, proj, fc1, fc2
    }
    // 12 params per block.
    EXPECT_EQ(g.param_grads().size(), 2u * 12u);
    EXPECT_TRUE(g.AllTypesKnown());
  }
}

TEST(GradientBuilderTest, AValueOverwrittenInPlaceIsNotReadBack) {
  // Gelu reads h; a later Add overwrites h in place, so GeluGradient would need a value that no
  // longer exists.
  absl::StatusOr<Graph> forward = GraphFromText(R"pb(
    name: "inplace"
    external_input: "x"
    external_input: "w"
    op { type: "MatMul" input: "x" input: "w" output: "h" name: "mm" }
    op { type: "Gelu" input: "h" output: "g" name: "gelu" }
    op { type: "Add" input: "h" input: "g" output: "h" name: "add" }
    op { type: "AveragedLoss" input: "h" output: "loss" name: "loss" }
    value_info { name: "w" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 4 } dim { size: 4 } }
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 4 } }
  )pb");
  ASSERT_TRUE(forward.ok()) << forward.status();
  ASSERT_TRUE(InferShapes(*forward, ShapeBindings{}).ok());
  absl::StatusOr<Graph> g = AddGradientOps(*forward, {"loss"});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("gradient of Gelu op 'gelu' needs 'h', which a later op overwrites"));
}

TEST(GradientBuilderTest, ErrorsNameTheProblem) {
  const Graph mlp = Workload("mlp:layers=1");
  EXPECT_THAT(std::string(AddGradientOps(mlp, {"nope"}).status().message()),
              HasSubstr("loss 'nope' is not a value"));
  absl::StatusOr<Graph> no_param = GraphFromText(R"pb(
    name: "no_param"
    external_input: "x"
    op { type: "Relu" input: "x" output: "y" }
    op { type: "AveragedLoss" input: "y" output: "loss" }
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 3 } }
  )pb");
  ASSERT_TRUE(no_param.ok());
  ASSERT_TRUE(InferShapes(*no_param, ShapeBindings{}).ok());
  EXPECT_THAT(std::string(AddGradientOps(*no_param, {}).status().message()),
              HasSubstr("no loss to differentiate"));
  EXPECT_THAT(std::string(AddGradientOps(*no_param, {"loss"}).status().message()),
              HasSubstr("does not depend on any parameter"));
  absl::StatusOr<Graph> tanh = GraphFromText(R"pb(
    name: "tanh"
    external_input: "x"
    external_input: "w"
    op { type: "MatMul" input: "x" input: "w" output: "h" name: "mm" }
    op { type: "Tanh" input: "h" output: "y" name: "t" }
    op { type: "AveragedLoss" input: "y" output: "loss" }
    value_info { name: "w" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 3 } dim { size: 3 } }
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 3 } }
  )pb");
  ASSERT_TRUE(tanh.ok()) << tanh.status();
  ASSERT_TRUE(InferShapes(*tanh, ShapeBindings{}).ok());
  absl::StatusOr<Graph> g = AddGradientOps(*tanh, {"loss"});
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("no gradient rule for Tanh op 't'"));
}

}  // namespace
}  // namespace memonger::graph
