#include "graph/gradient_builder.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocator/arena.h"
#include "allocator/executor.h"
#include "gmock/gmock.h"
#include "graph/rebuild.h"
#include "graph/shape_inference.h"
#include "graph/tensor_type.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/test_support.h"
#include "workloads/workloads.h"

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

// Sigmoid and Tanh read their output Y (Caffe2's rules); Concat's gradient is a Split of dY
// into the inputs' sizes along the Concat's axis, written normalised.
TEST(GradientBuilderTest, SigmoidTanhAndConcatRules) {
  absl::StatusOr<Graph> forward = GraphFromText(R"pb(
    name: "concat"
    external_input: "a"
    external_input: "b"
    op { type: "Sigmoid" input: "a" output: "s" name: "sigmoid" }
    op { type: "Tanh" input: "b" output: "t" name: "tanh" }
    op { type: "Concat" input: "s" input: "t" output: "c" name: "concat"
         arg { name: "axis" i: -1 } }
    op { type: "AveragedLoss" input: "c" output: "loss" name: "loss" }
    value_info { name: "a" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 3 } }
    value_info { name: "b" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 5 } }
  )pb");
  ASSERT_TRUE(forward.ok()) << forward.status();
  ASSERT_TRUE(InferShapes(*forward, ShapeBindings{}).ok());
  absl::StatusOr<Graph> g = AddGradientOps(*forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  const std::map<std::string, int> counts = OpCounts(*g);
  EXPECT_EQ(counts.at("SigmoidGradient"), 1);
  EXPECT_EQ(counts.at("TanhGradient"), 1);
  EXPECT_EQ(counts.at("Split"), 1);
  for (const Op& op : g->ops()) {
    if (op.type == "Split") {
      EXPECT_EQ(op.attributes().GetInt("axis"), 1);
      EXPECT_EQ(op.attributes().GetInts("split"), (std::vector<int64_t>{3, 5}));
      ASSERT_EQ(op.outputs.size(), 2u);
      EXPECT_EQ(TensorTypeToString(*g->value(op.outputs[0]).type), "float32[2,3]");
      EXPECT_EQ(TensorTypeToString(*g->value(op.outputs[1]).type), "float32[2,5]");
    }
    if (op.type == "SigmoidGradient") {
      EXPECT_EQ(g->value(op.inputs[0]).name, "s");
    }
    if (op.type == "TanhGradient") {
      EXPECT_EQ(g->value(op.inputs[0]).name, "t");
    }
  }
  ASSERT_EQ(g->param_grads().size(), 2u);
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
  absl::StatusOr<Graph> exp = GraphFromText(R"pb(
    name: "exp"
    external_input: "x"
    external_input: "w"
    op { type: "MatMul" input: "x" input: "w" output: "h" name: "mm" }
    op { type: "Sin" input: "h" output: "s" name: "sin" }
    op { type: "Cos" input: "s" output: "y" name: "cos" }
    op { type: "AveragedLoss" input: "y" output: "loss" }
    value_info { name: "w" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 3 } dim { size: 3 } }
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 3 } }
  )pb");
  ASSERT_TRUE(exp.ok()) << exp.status();
  ASSERT_TRUE(InferShapes(*exp, ShapeBindings{}).ok());
  absl::StatusOr<Graph> g = AddGradientOps(*exp, {"loss"});
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  // Every op type without a rule is named, the ones before the first too.
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("no gradient rule for op types Cos, Sin (first: Cos op 'cos'"));
}

// A typed forward net from pbtxt.
Graph Forward(const std::string& text) {
  absl::StatusOr<Graph> g = GraphFromText(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Graph();
  const absl::Status typed = InferShapes(*g, ShapeBindings{});
  EXPECT_TRUE(typed.ok()) << typed;
  return *std::move(g);
}

const Op* FindOp(const Graph& g, const std::string& type) {
  for (const Op& op : g.ops()) {
    if (op.type == type) return &op;
  }
  return nullptr;
}

// "value_info { name: <name> role: ROLE_PARAM dtype: FLOAT has_shape: true dim {...} }".
std::string ParamDecl(const std::string& name, const std::vector<int64_t>& dims) {
  std::string s = absl::StrCat("external_input: \"", name, "\"\nvalue_info { name: \"", name,
                               "\" role: ROLE_PARAM dtype: FLOAT has_shape: true");
  for (int64_t d : dims) absl::StrAppend(&s, " dim { size: ", d, " }");
  return absl::StrCat(s, " }\n");
}

// Names as Caffe2's gradient builder writes them: the loss seed "loss_autogen_grad"; a value
// read by two ops gets "h_grad" from the first gradient op and "_h_grad_autosplit_0" from the
// second, summed in place into "h_grad"; so that Caffe2's `_grad` rule finds the gradients of
// a net written out without its declarations.
TEST(GradientBuilderTest, GradientNamesAreCaffe2s) {
  const Graph forward = Forward(absl::StrCat(ParamDecl("x", {2, 3}), R"pb(
    op { name: "h" type: "Relu" input: "x" output: "h" }
    op { name: "a" type: "Relu" input: "h" output: "a" }
    op { name: "b" type: "Sigmoid" input: "h" output: "b" }
    op { name: "s" type: "Sum" input: "a" input: "b" output: "s" }
    op { name: "loss" type: "AveragedLoss" input: "s" output: "loss" }
  )pb"));
  absl::StatusOr<Graph> g = AddGradientOps(forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(g->FindValue("loss_autogen_grad").has_value());
  EXPECT_EQ(g->op(g->value(*g->FindValue("loss_autogen_grad")).producer).type, "ConstantFill");
  const Op* sum = nullptr;
  for (const Op& op : g->ops()) {
    if (op.type == "Sum" && op.is_gradient_op) sum = &op;
  }
  ASSERT_NE(sum, nullptr);
  std::vector<std::string> inputs;
  for (ValueId v : sum->inputs) inputs.push_back(g->value(v).DisplayName());
  EXPECT_THAT(inputs, ::testing::ElementsAre("h_grad", "_h_grad_autosplit_0"));
  ASSERT_EQ(sum->outputs.size(), 1u);
  EXPECT_EQ(g->value(sum->outputs[0]).DisplayName(), "h_grad@1");  // in place
  EXPECT_EQ(g->value(sum->outputs[0]).inplace_of, sum->inputs[0]);
}

// The GELU torch.onnx.export writes (x * (1 + erf(x / sqrt 2)) * 0.5, constants in the model's
// data) differentiates as one GeluGradient from x: none of its intermediates is read by the
// backward pass. Without the constants' data (or with other numbers) it is differentiated op
// by op.
TEST(GradientBuilderTest, ExportersGeluIsOneGeluGradient) {
  auto net = [](bool with_data, float half) {
    Graph forward = Forward(absl::StrCat(ParamDecl("x", {2, 3}), R"pb(
      external_input: "sqrt2" external_input: "one" external_input: "half"
      value_info { name: "sqrt2" role: ROLE_CONSTANT dtype: FLOAT has_shape: true }
      value_info { name: "one" role: ROLE_CONSTANT dtype: FLOAT has_shape: true }
      value_info { name: "half" role: ROLE_CONSTANT dtype: FLOAT has_shape: true }
      op { name: "d" type: "Div" input: "x" input: "sqrt2" output: "d" }
      op { name: "e" type: "Erf" input: "d" output: "e" }
      op { name: "a" type: "Add" input: "e" input: "one" output: "a" }
      op { name: "p" type: "Mul" input: "x" input: "a" output: "p" }
      op { name: "y" type: "Mul" input: "p" input: "half" output: "y" }
      op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
    )pb"));
    if (with_data) {
      auto data = std::make_shared<graph::StaticData>();
      auto scalar = [&](const std::string& name, float v) {
        graph::TensorData t;
        t.type = graph::TensorType{graph::DataType::kFloat32, {}};
        t.bytes.assign(reinterpret_cast<const char*>(&v), sizeof(v));
        data->emplace(name, std::move(t));
      };
      scalar("sqrt2", 1.41421356f);
      scalar("one", 1.0f);
      scalar("half", half);
      forward.set_static_data(std::move(data));
    }
    return forward;
  };
  auto gradient_types = [](const Graph& g) {
    std::vector<std::string> types;
    for (const Op& op : g.ops()) {
      if (op.is_gradient_op && op.type != "ConstantFill") types.push_back(op.type);
    }
    return types;
  };
  absl::StatusOr<Graph> fused = AddGradientOps(net(true, 0.5f), {"loss"});
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_THAT(gradient_types(*fused),
              ::testing::ElementsAre("AveragedLossGradient", "GeluGradient"));
  for (const char* other : {"d", "e", "a", "p"}) {
    const ValueId v = *fused->FindValue(other);
    for (OpId reader : fused->consumers(v)) EXPECT_FALSE(fused->op(reader).is_gradient_op) << other;
  }
  absl::StatusOr<Graph> no_data = AddGradientOps(net(false, 0.5f), {"loss"});
  ASSERT_TRUE(no_data.ok()) << no_data.status();
  EXPECT_THAT(gradient_types(*no_data), ::testing::Not(::testing::Contains("GeluGradient")));
  absl::StatusOr<Graph> other_scale = AddGradientOps(net(true, 0.25f), {"loss"});
  ASSERT_TRUE(other_scale.ok()) << other_scale.status();
  EXPECT_THAT(gradient_types(*other_scale), ::testing::Not(::testing::Contains("GeluGradient")));
}

// MatMul(x, Transpose(W)) as exporters write a Linear on 3-D x: the gradient reads W (trans_b),
// not the transposed copy, which dies at the forward MatMul.
TEST(GradientBuilderTest, TransposedWeightIsNotKeptForTheBackwardPass) {
  const Graph forward = Forward(absl::StrCat(ParamDecl("x", {2, 3, 4}), ParamDecl("w", {5, 4}), R"pb(
    op { name: "t" type: "Transpose" input: "w" output: "wT" arg { name: "perm" ints: 1 ints: 0 } }
    op { name: "mm" type: "MatMul" input: "x" input: "wT" output: "y" }
    op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
  )pb"));
  absl::StatusOr<Graph> g = AddGradientOps(forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  const Op* grad = FindOp(*g, "MatMulGradient");
  ASSERT_NE(grad, nullptr);
  EXPECT_EQ(g->value(grad->inputs[2]).name, "w");
  EXPECT_EQ(grad->attributes().GetInt("trans_b", 0), 1);
  for (const auto& [param, param_grad] : g->param_grads()) {
    if (g->value(param).name == "w") EXPECT_EQ(param_grad, grad->outputs[1]);
  }
  for (OpId reader : g->consumers(*g->FindValue("wT"))) EXPECT_FALSE(g->op(reader).is_gradient_op);
}

// A parameter that broadcasts over a batch (a bias [1, 3], a factor [1, 3], a Gemm's C [3])
// gets the same gradient ops at batch 1, where its dims equal the output's, as at batch 4: a
// plan over a range of the batch reads the net built at several bindings and needs one set.
TEST(GradientBuilderTest, BroadcastParametersGetTheSameOpsAtEveryBatch) {
  auto types_at = [](int64_t batch) {
    const Graph forward = Forward(absl::StrCat(
        ParamDecl("w", {3, 3}), ParamDecl("bias", {1, 3}), ParamDecl("c", {3}),
        ParamDecl("scale", {1, 3}),
        "external_input: \"x\"\nvalue_info { name: \"x\" dtype: FLOAT has_shape: true dim { size: ",
        batch, " } dim { size: 3 } }\n", R"pb(
      op { name: "gemm" type: "Gemm" input: "x" input: "w" input: "c" output: "h" }
      op { name: "add" type: "Add" input: "h" input: "bias" output: "a" }
      op { name: "scaled" type: "Mul" input: "a" input: "scale" output: "y" }
      op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
    )pb"));
    absl::StatusOr<Graph> g = AddGradientOps(forward, {"loss"});
    EXPECT_TRUE(g.ok()) << g.status();
    std::vector<std::string> types;
    if (g.ok()) {
      for (const Op& op : g->ops()) types.push_back(op.type);
    }
    return types;
  };
  const std::vector<std::string> one = types_at(1);
  EXPECT_EQ(one, types_at(4));
  EXPECT_EQ(std::count(one.begin(), one.end(), "ReduceSum"), 3);  // dbias, dc and dscale
}

// A value read by two Slices gets its gradient from a Pad (no schema: typed by declaration)
// and the second read's summed into the same blob in place (Caffe2's Sum). A rewrite of the
// net (recomputation, fp16 storage) copies the interface: the blob, written twice with one
// type, keeps its declaration, so the rebuilt net types again (vit_small's attention slices
// failed --recompute with "op type 'Pad' has no shape function").
TEST(GradientBuilderTest, RebuiltNetTypesAGradientSummedInPlace) {
  // Slice has no schema either: an importer declares its outputs (libonnx types them).
  const Graph forward = Forward(absl::StrCat(ParamDecl("w", {2, 6}), R"pb(
    value_info { name: "a" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 3 } }
    value_info { name: "b" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 3 } }
    op { name: "s1" type: "Slice" input: "w" output: "a"
         arg { name: "starts" ints: 0 ints: 0 } arg { name: "ends" ints: 2 ints: 3 } }
    op { name: "s2" type: "Slice" input: "w" output: "b"
         arg { name: "starts" ints: 0 ints: 2 } arg { name: "ends" ints: 2 ints: 5 } }
    op { name: "add" type: "Add" input: "a" input: "b" output: "y" }
    op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
  )pb"));
  // (The slices overlap: each gradient is padded back to w's dims and the two are summed.)
  absl::StatusOr<Graph> g = AddGradientOps(forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_NE(FindOp(*g, "Pad"), nullptr);
  EXPECT_EQ(g->Versions("w_grad").size(), 2u);
  GraphBuilder out(g->name());
  CopyInterface(*g, out);
  for (const Op& op : g->ops()) out.AddOp(SpecOf(*g, op));
  absl::StatusOr<Graph> rebuilt = std::move(out).Build();
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  ASSERT_TRUE(InferShapes(*rebuilt, ShapeBindings{}).ok());
  ASSERT_EQ(rebuilt->num_values(), g->num_values());
  for (ValueId v = 0; v < g->num_values(); ++v) {
    EXPECT_EQ(rebuilt->value(v).type, g->value(v).type) << g->value(v).name;
  }
}

// Slices that cut a value into pieces covering it once (an exporter's gate split of a weight)
// give one Concat of their gradients, zeros for a piece no loss reads; not a Pad of each to the
// full size and a Sum.
TEST(GradientBuilderTest, SlicesThatTileAValueJoinTheirGradientsByConcat) {
  const Graph forward = Forward(absl::StrCat(ParamDecl("w", {6, 2}), R"pb(
    value_info { name: "a" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 2 } }
    value_info { name: "b" dtype: FLOAT has_shape: true dim { size: 1 } dim { size: 2 } }
    value_info { name: "c" dtype: FLOAT has_shape: true dim { size: 3 } dim { size: 2 } }
    op { name: "s3" type: "Slice" input: "w" output: "c"
         arg { name: "starts" ints: 3 } arg { name: "ends" ints: 6 } arg { name: "axes" ints: 0 } }
    op { name: "s1" type: "Slice" input: "w" output: "a"
         arg { name: "starts" ints: 0 } arg { name: "ends" ints: 2 } arg { name: "axes" ints: 0 } }
    op { name: "s2" type: "Slice" input: "w" output: "b"
         arg { name: "starts" ints: 2 } arg { name: "ends" ints: 3 } arg { name: "axes" ints: 0 } }
    op { name: "sum_a" type: "ReduceSum" input: "a" output: "ra" arg { name: "keepdims" i: 0 } }
    op { name: "sum_c" type: "ReduceSum" input: "c" output: "rc" arg { name: "keepdims" i: 0 } }
    op { name: "add" type: "Add" input: "ra" input: "rc" output: "y" }
    op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
  )pb"));
  absl::StatusOr<Graph> g = AddGradientOps(forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(FindOp(*g, "Pad"), nullptr);
  EXPECT_EQ(FindOp(*g, "Sum"), nullptr);
  const Op* concat = FindOp(*g, "Concat");
  ASSERT_NE(concat, nullptr);
  ASSERT_EQ(concat->inputs.size(), 3u);  // a's, b's (zeros: no loss reads b), c's, in w's order
  EXPECT_EQ(g->value(concat->outputs[0]).name, "w_grad");
  EXPECT_EQ(g->value(concat->inputs[0]).type->dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(g->op(g->value(concat->inputs[1]).producer).type, "ConstantFill");
  EXPECT_EQ(g->value(concat->inputs[2]).type->dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(concat->attributes().GetInt("axis"), 0);
}

// A weight rearranged by moves alone (Slice, Concat, Unsqueeze: how torch.onnx.export writes an
// LSTM's W without constant folding) is made again for the backward op that reads it, so the
// forward copy dies at its forward reader; the LSTM's Y, omitted by the node, is added for the
// gradient (it recomputes the gates from every step's state).
TEST(GradientBuilderTest, RearrangedWeightsAreRemadeAndAnLstmGainsY) {
  const Graph forward = Forward(absl::StrCat(
      ParamDecl("x", {3, 1, 2}), ParamDecl("p", {8, 2}), ParamDecl("rw", {1, 8, 2}), R"pb(
    value_info { name: "lo" dtype: FLOAT has_shape: true dim { size: 4 } dim { size: 2 } }
    value_info { name: "hi" dtype: FLOAT has_shape: true dim { size: 4 } dim { size: 2 } }
    value_info { name: "y_h" dtype: FLOAT has_shape: true dim { size: 1 } dim { size: 1 }
                 dim { size: 2 } }
    op { name: "lo" type: "Slice" input: "p" output: "lo"
         arg { name: "starts" ints: 0 } arg { name: "ends" ints: 4 } arg { name: "axes" ints: 0 } }
    op { name: "hi" type: "Slice" input: "p" output: "hi"
         arg { name: "starts" ints: 4 } arg { name: "ends" ints: 8 } arg { name: "axes" ints: 0 } }
    op { name: "swap" type: "Concat" input: "hi" input: "lo" output: "q" arg { name: "axis" i: 0 } }
    op { name: "w" type: "Unsqueeze" input: "q" output: "w" arg { name: "axes" ints: 0 } }
    op { name: "lstm" type: "LSTM" input: "x" input: "w" input: "rw" output: "y_h"
         arg { name: "onnx_output_slots" ints: 1 } }
    op { name: "loss" type: "AveragedLoss" input: "y_h" output: "loss" }
  )pb"));
  absl::StatusOr<Graph> g = AddGradientOps(forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  const Op* grad = FindOp(*g, "LSTMGradient");
  ASSERT_NE(grad, nullptr);
  std::vector<std::string> reads;
  for (ValueId in : grad->inputs) reads.push_back(g->value(in).name);
  EXPECT_THAT(reads, ::testing::ElementsAre("x", "w_remade", "rw", "y_h_all_steps",
                                            "y_h_grad"))
      << absl::StrJoin(reads, ", ");
  EXPECT_EQ(grad->attributes().GetInts("onnx_input_slots"),
            (std::vector<int64_t>{0, 1, 2, 8, 10}));
  EXPECT_EQ(grad->attributes().GetInts("onnx_output_slots"), (std::vector<int64_t>{0, 1, 2}));
  // The forward LSTM writes Y and Y_h now (no gap left), Y typed [seq, dirs, batch, hidden].
  const Op* lstm = FindOp(*g, "LSTM");
  ASSERT_NE(lstm, nullptr);
  ASSERT_EQ(lstm->outputs.size(), 2u);
  EXPECT_FALSE(lstm->attributes().Has("onnx_output_slots"));
  EXPECT_EQ(g->value(lstm->outputs[0]).type->dims, (std::vector<int64_t>{3, 1, 1, 2}));
  // w's forward copy is read by the forward LSTM alone.
  const std::optional<ValueId> w = g->FindValue("w");
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(g->consumers(*w).size(), 1u);
}

// Pad: constant mode without crops is a Slice of dY; reflect, edge and negative pads are
// refused by name (their gradients fold dY back onto X, which no Slice does).
TEST(GradientBuilderTest, PadIsASliceOfTheGradientAndOtherModesAreRefused) {
  auto build = [](const std::string& mode, const std::string& pads) {
    const Graph forward = Forward(absl::StrCat(ParamDecl("x", {2, 3}), R"pb(
      value_info { name: "y" dtype: FLOAT has_shape: true dim { size: 4 } dim { size: 4 } }
      op { name: "pad" type: "Pad" input: "x" output: "y" arg { name: "mode" s: ")pb", mode,
                                               R"pb(" } arg { name: "pads" )pb", pads, R"pb( } }
      op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
    )pb"));
    return AddGradientOps(forward, {"loss"});
  };
  absl::StatusOr<Graph> constant = build("constant", "ints: 1 ints: 0 ints: 1 ints: 1");
  ASSERT_TRUE(constant.ok()) << constant.status();
  const Op* slice = FindOp(*constant, "Slice");
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->attributes().GetInts("starts"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(slice->attributes().GetInts("ends"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(constant->value(slice->outputs[0]).type->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_THAT(std::string(build("reflect", "ints: 1 ints: 0 ints: 1 ints: 1").status().message()),
              HasSubstr("gradient of Pad op 'pad': mode 'reflect' (not supported)"));
}

// Gemm: only the gradients that are needed, as Gemm/ReduceSum/Reshape/ConstantFill/Mul ops,
// with the transposes and alpha folded into the Gemm attributes.
TEST(GradientBuilderTest, GemmGradientsAreExistingOps) {
  // x is an input (no gradient), w [5, 4] used transposed, c [5] scaled by beta.
  const Graph forward = Forward(absl::StrCat(
      "name: \"gemm\"\nexternal_input: \"x\"\n"
      "value_info { name: \"x\" dtype: FLOAT has_shape: true dim { size: 3 } dim { size: 4 } }\n",
      ParamDecl("w", {5, 4}), ParamDecl("c", {5}), R"pb(
        op { name: "fc" type: "Gemm" input: "x" input: "w" input: "c" output: "y"
             arg { name: "transB" i: 1 } arg { name: "alpha" f: 0.5 } arg { name: "beta" f: 3 } }
        op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
      )pb"));
  absl::StatusOr<Graph> g = AddGradientOps(forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  const std::map<std::string, int> counts = OpCounts(*g);
  EXPECT_EQ(counts.at("Gemm"), 2);  // the forward one and dW; no dX
  EXPECT_EQ(counts.at("ReduceSum"), 1);
  EXPECT_EQ(counts.at("Reshape"), 1);
  EXPECT_EQ(counts.at("Mul"), 1);
  EXPECT_EQ(counts.at("ConstantFill"), 2);  // the loss seed and beta
  const Op* dw_op = nullptr;
  for (const Op& op : g->ops()) {
    if (op.type == "Gemm" && op.is_gradient_op) dw_op = &op;
  }
  ASSERT_NE(dw_op, nullptr);
  const Op& dw = *dw_op;
  EXPECT_EQ(dw.attributes().GetInt("transA", -1), 1);  // dW [N, K] = dY^T x
  EXPECT_EQ(dw.attributes().GetInt("transB", -1), 0);
  EXPECT_EQ(dw.attributes().GetFloat("alpha"), 0.5);
  EXPECT_EQ(g->value(dw.inputs[1]).name, "x");
  ASSERT_EQ(g->param_grads().size(), 2u);
  for (const auto& [param, grad] : g->param_grads()) {
    EXPECT_EQ(*g->value(grad).type, *g->value(param).type);
  }

  // A full C with beta = 1 receives dY itself: no op for dC.
  const Graph full = Forward(absl::StrCat("name: \"gemm_full\"\n", ParamDecl("a", {3, 4}),
                                          ParamDecl("b", {4, 5}), ParamDecl("c", {3, 5}), R"pb(
    op { name: "fc" type: "Gemm" input: "a" input: "b" input: "c" output: "y" }
    op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
  )pb"));
  absl::StatusOr<Graph> gf = AddGradientOps(full, {"loss"});
  ASSERT_TRUE(gf.ok()) << gf.status();
  EXPECT_EQ(OpCounts(*gf).at("Gemm"), 3);
  EXPECT_EQ(OpCounts(*gf).count("ReduceSum"), 0u);
  for (const auto& [param, grad] : gf->param_grads()) {
    if (gf->value(param).name == "c") {
      EXPECT_EQ(gf->value(grad).name, "y_grad");
    }
  }
}

constexpr char kBatchNormTraining[] = R"pb(
  op { name: "bn" type: "BatchNormalization" input: "x" input: "s" input: "b" input: "m"
       input: "v" output: "y" arg { name: "training_mode" i: 1 } arg { name: "epsilon" f: 0.01 } }
  op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
)pb";

std::string BatchNormParams() {
  return absl::StrCat(ParamDecl("x", {2, 3, 4}), ParamDecl("s", {3}), ParamDecl("b", {3}),
                      ParamDecl("m", {3}), ParamDecl("v", {3}));
}

// Training: the forward op gains running and saved statistics, the gradient reads the saved
// ones; input_mean/input_var get no gradient. Inference: the gradient reads input_mean and
// input_var and, as parameters, they get gradients.
TEST(GradientBuilderTest, BatchNormalizationSavesStatisticsInTrainingMode) {
  const Graph training =
      Forward(absl::StrCat("name: \"bn\"\n", BatchNormParams(), kBatchNormTraining));
  absl::StatusOr<Graph> g = AddGradientOps(training, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  const Op* bn = FindOp(*g, "BatchNormalization");
  ASSERT_NE(bn, nullptr);
  ASSERT_EQ(bn->outputs.size(), 5u);
  EXPECT_EQ(g->value(bn->outputs[3]).name, "y_saved_mean");
  EXPECT_EQ(g->value(bn->outputs[4]).name, "y_saved_var");
  const Op* grad = FindOp(*g, "BatchNormalizationGradient");
  ASSERT_NE(grad, nullptr);
  EXPECT_EQ(grad->inputs[3], bn->outputs[3]);
  EXPECT_EQ(grad->inputs[4], bn->outputs[4]);
  EXPECT_EQ(grad->outputs.size(), 3u);
  EXPECT_EQ(grad->attributes().GetInt("training_mode", -1), 1);
  EXPECT_EQ(grad->attributes().GetFloat("epsilon"), 0.01f);  // as the pbtxt's float holds it
  EXPECT_EQ(g->param_grads().size(), 3u);  // x, s, b

  const std::string inference_text = absl::StrCat("name: \"bn\"\n", BatchNormParams(), R"pb(
    op { name: "bn" type: "BatchNormalization" input: "x" input: "s" input: "b" input: "m"
         input: "v" output: "y" }
    op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
  )pb");
  absl::StatusOr<Graph> gi = AddGradientOps(Forward(inference_text), {"loss"});
  ASSERT_TRUE(gi.ok()) << gi.status();
  EXPECT_EQ(FindOp(*gi, "BatchNormalization")->outputs.size(), 1u);
  const Op* igrad = FindOp(*gi, "BatchNormalizationGradient");
  ASSERT_NE(igrad, nullptr);
  EXPECT_EQ(gi->value(igrad->inputs[3]).name, "m");
  EXPECT_EQ(gi->value(igrad->inputs[4]).name, "v");
  EXPECT_EQ(igrad->outputs.size(), 5u);
  EXPECT_EQ(igrad->attributes().GetInt("training_mode", -1), 0);
  EXPECT_EQ(gi->param_grads().size(), 5u);
}

TEST(GradientBuilderTest, BatchNormalizationRefusesWhatItCannotDifferentiate) {
  struct Bad {
    const char* name;
    std::string ops;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {"running statistics reach the loss", R"pb(
         op { name: "bn" type: "BatchNormalization" input: "x" input: "s" input: "b" input: "m"
              input: "v" output: "y" output: "rm" output: "rv"
              arg { name: "training_mode" i: 1 } }
         op { name: "sum" type: "Sum" input: "s" input: "rm" output: "t" }
         op { name: "l2" type: "AveragedLoss" input: "t" output: "aux" }
         op { name: "l1" type: "AveragedLoss" input: "y" output: "main" }
         op { name: "add" type: "Sum" input: "aux" input: "main" output: "loss" }
       )pb",
       "gradient of BatchNormalization op 'bn': a loss depends on output 1 ('rm')"},
      {"omitted outputs", R"pb(
         op { name: "bn" type: "BatchNormalization" input: "x" input: "s" input: "b" input: "m"
              input: "v" output: "y" output: "sm" output: "sv"
              arg { name: "onnx_output_slots" ints: 0 ints: 3 ints: 4 } }
         op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
       )pb",
       "gradient of BatchNormalization op 'bn': an omitted optional output before a present one"},
      {"spatial=0", R"pb(
         op { name: "bn" type: "BatchNormalization" input: "x" input: "s" input: "b" input: "m"
              input: "v" output: "y" arg { name: "spatial" i: 0 } }
         op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
       )pb",
       "gradient of BatchNormalization op 'bn': spatial=0 (not supported)"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    const Graph forward = Forward(absl::StrCat("name: \"bad\"\n", BatchNormParams(), c.ops));
    absl::StatusOr<Graph> g = AddGradientOps(forward, {"loss"});
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.message));
  }
}

// The rules that differentiate output 0 alone refuse a loss that reads another output (here
// SpatialBN's running mean, LayerNormalization's Mean), instead of dropping its gradient.
TEST(GradientBuilderTest, StatisticsOutputsThatReachALossAreRefused) {
  struct Bad {
    const char* name;
    std::string net;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {"SpatialBN running_mean", absl::StrCat(BatchNormParams(), R"pb(
         op { name: "sbn" type: "SpatialBN" input: "x" input: "s" input: "b" input: "m"
              input: "v" output: "y" output: "rm" output: "rv" output: "sm" output: "sv" }
         op { name: "l1" type: "AveragedLoss" input: "y" output: "main" }
         op { name: "l2" type: "AveragedLoss" input: "rm" output: "aux" }
         op { name: "add" type: "Sum" input: "main" input: "aux" output: "loss" }
       )pb"),
       "gradient of SpatialBN op 'sbn': a loss depends on output 1 ('rm')"},
      {"LayerNormalization Mean", absl::StrCat(ParamDecl("x", {2, 3, 4}), ParamDecl("s", {4}), R"pb(
         op { name: "ln" type: "LayerNormalization" input: "x" input: "s" output: "y"
              output: "mean" output: "inv" }
         op { name: "l1" type: "AveragedLoss" input: "y" output: "main" }
         op { name: "l2" type: "AveragedLoss" input: "mean" output: "aux" }
         op { name: "add" type: "Sum" input: "main" input: "aux" output: "loss" }
       )pb"),
       "gradient of LayerNormalization op 'ln': a loss depends on output 1 ('mean')"},
      {"LayerNormalization without Mean but with InvStdDev",
       absl::StrCat(ParamDecl("x", {2, 3, 4}), ParamDecl("s", {4}), R"pb(
         op { name: "ln" type: "LayerNormalization" input: "x" input: "s" output: "y"
              output: "inv" arg { name: "onnx_output_slots" ints: 0 ints: 2 } }
         op { name: "loss" type: "AveragedLoss" input: "y" output: "loss" }
       )pb"),
       "gradient of LayerNormalization op 'ln': an omitted optional output before a present one"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Graph> g =
        AddGradientOps(Forward(absl::StrCat("name: \"bad\"\n", c.net)), {"loss"});
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.message));
  }
}

// The training net of an MLP written with ONNX ops (Gemm, BatchNormalization in both modes)
// plans under every serial planner and passes the executor's verify mode: no value is
// overwritten while live, the added saved statistics included.
TEST(GradientBuilderTest, GemmBatchNormTrainingNetPassesVerifyMode) {
  const Graph forward = Forward(absl::StrCat(
      "name: \"onnx_mlp\"\nexternal_input: \"x\"\nexternal_input: \"label\"\n"
      "value_info { name: \"x\" dtype: FLOAT has_shape: true dim { size: 8 } dim { size: 6 } }\n"
      "value_info { name: \"label\" dtype: INT32 has_shape: true dim { size: 8 } }\n",
      ParamDecl("w1", {16, 6}), ParamDecl("c1", {16}), ParamDecl("s1", {16}),
      ParamDecl("b1", {16}), ParamDecl("m1", {16}), ParamDecl("v1", {16}),
      ParamDecl("w2", {16, 4}), ParamDecl("c2", {1, 4}), ParamDecl("s2", {4}),
      ParamDecl("b2", {4}), ParamDecl("m2", {4}), ParamDecl("v2", {4}), R"pb(
        op { name: "fc1" type: "Gemm" input: "x" input: "w1" input: "c1" output: "h"
             arg { name: "transB" i: 1 } }
        op { name: "bn1" type: "BatchNormalization" input: "h" input: "s1" input: "b1"
             input: "m1" input: "v1" output: "hn" output: "m1_next" output: "v1_next"
             arg { name: "training_mode" i: 1 } }
        op { name: "relu" type: "Relu" input: "hn" output: "a" }
        op { name: "fc2" type: "Gemm" input: "a" input: "w2" input: "c2" output: "z"
             arg { name: "alpha" f: 0.5 } arg { name: "beta" f: 2 } }
        op { name: "bn2" type: "BatchNormalization" input: "z" input: "s2" input: "b2"
             input: "m2" input: "v2" output: "zn" }
        op { name: "softmax" type: "Softmax" input: "zn" output: "p" }
        op { name: "xent" type: "LabelCrossEntropy" input: "p" input: "label" output: "xent" }
        op { name: "mean" type: "AveragedLoss" input: "xent" output: "loss" }
        external_output: "loss"
        loss: "loss"
      )pb"));
  absl::StatusOr<Graph> g = AddGradientOps(forward, {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->param_grads().size(), 10u);  // all 12 parameters but m1, v1
  for (PlannerKind planner :
       {PlannerKind::kNone, PlannerKind::kMemongerDag, PlannerKind::kMemongerGreedy,
        PlannerKind::kExactSharing, PlannerKind::kGreedyBySize, PlannerKind::kBestFit,
        PlannerKind::kExact, PlannerKind::kAuto}) {
    SCOPED_TRACE(PlannerName(planner));
    PlanOptions options;
    options.planner = planner;
    options.memonger.mode = Mode::kTraining;
    options.alignment = 64;
    options.time_limit_seconds = 0.3;
    absl::StatusOr<Plan> plan = PlanMemory(*g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(VerifyPlan(*g, *plan).ok()) << VerifyPlan(*g, *plan);
    absl::StatusOr<alloc::Arena> arena =
        alloc::Arena::Create(alloc::Device::kHost, plan->arena_bytes);
    ASSERT_TRUE(arena.ok()) << arena.status();
    absl::StatusOr<alloc::Executor> executor = alloc::Executor::Create(*g, *plan, *arena);
    ASSERT_TRUE(executor.ok()) << executor.status();
    const absl::Status verified = executor->RunVerify();
    EXPECT_TRUE(verified.ok()) << verified;
  }
}

// Each gradient op runs on its forward op's device, as Caffe2's AddGradientOperators copies the
// device_option: a net whose second half is on cuda:1 trains that half there, the rest on the
// CPU, with no value read across devices but where the forward pass already crossed.
TEST(GradientBuilderTest, GradientOpsRunOnTheirForwardOpsDevice) {
  absl::StatusOr<Graph> forward = GraphFromText(R"pb(
    external_input: "x" external_input: "w" external_input: "v"
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 4 } dim { size: 8 } }
    value_info { name: "w" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 8 }
                 dim { size: 8 } }
    value_info { name: "v" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 8 }
                 dim { size: 8 } }
    op { type: "MatMul" input: "x" input: "w" output: "h" }
    op { type: "Relu" input: "h" output: "r" }
    op { type: "MatMul" input: "r" input: "v" output: "y"
         device_option { device_type: 1 device_id: 1 } }
    op { type: "Mul" input: "y" input: "y" output: "y2"
         device_option { device_type: 1 device_id: 1 } }
    op { type: "AveragedLoss" input: "y2" output: "loss"
         device_option { device_type: 1 device_id: 1 } }
  )pb");
  ASSERT_TRUE(forward.ok()) << forward.status();
  ASSERT_TRUE(InferShapes(*forward, ShapeBindings{}).ok());
  absl::StatusOr<Graph> g = AddGradientOps(*forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  const Device cuda1{1, 1};
  std::map<std::string, int> on_cuda, on_cpu;
  for (const Op& op : g->ops()) {
    if (!op.is_gradient_op) continue;
    (op.device == cuda1 ? on_cuda : on_cpu)[op.type]++;
    EXPECT_TRUE(op.device == cuda1 || op.device == Device{}) << op.name;
  }
  // The loss seed, AveragedLoss's, Mul's (and the Sum of its two pieces) and the second
  // MatMul's gradients on cuda:1; Relu's and the first MatMul's on the CPU.
  EXPECT_GT(on_cuda["ConstantFill"], 0);
  EXPECT_GT(on_cuda["AveragedLossGradient"], 0);
  EXPECT_GT(on_cuda["MatMulGradient"], 0);
  EXPECT_GT(on_cpu["ReluGradient"], 0);
  EXPECT_GT(on_cpu["MatMulGradient"], 0);
  EXPECT_EQ(on_cpu["AveragedLossGradient"], 0);
  EXPECT_EQ(on_cuda["ReluGradient"], 0);
  const std::optional<ValueId> dv = g->FindValue("v_grad");
  const std::optional<ValueId> dw = g->FindValue("w_grad");
  ASSERT_TRUE(dv.has_value() && dw.has_value());
  EXPECT_EQ(g->op(g->value(*dv).producer).device, cuda1);
  EXPECT_EQ(g->op(g->value(*dw).producer).device, Device{});
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(VerifyPlan(*g, *plan).ok()) << VerifyPlan(*g, *plan);
}

}  // namespace
}  // namespace memonger::graph
