// Gradient ops, with Caffe2's input and output order where Caffe2 has the op. Every gradient
// output has the type of the forward value it is the gradient of; each function also checks
// that the incoming gradient (dY) has the type of the forward output, which catches a gradient
// op wired to the wrong blobs.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_schema.h"
#include "graph/schema_util.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

using schema_internal::AddSchemas;
using schema_internal::Arity;
using schema_internal::BinaryElementwiseDims;
using schema_internal::BroadcastsTo;
using schema_internal::ChannelAxis;
using schema_internal::CheckCrossEntropy;
using schema_internal::CheckFloat;
using schema_internal::CheckLabelCrossEntropy;
using schema_internal::CheckOneElement;
using schema_internal::CheckSameDtype;
using schema_internal::CheckSameType;
using schema_internal::CheckSoftmaxWithLoss;
using schema_internal::Dims;
using schema_internal::FcShape;
using schema_internal::InferConv;
using schema_internal::InferFc;
using schema_internal::InferPool;
using schema_internal::IntAttr;
using schema_internal::MatMulDims;
using schema_internal::NormalizeAxis;
using schema_internal::Product;
using schema_internal::StatisticsDims;
using schema_internal::Str;
using schema_internal::TypeList;

constexpr Arity kOne{1, 1};

// dY must have the type the forward op produced.
absl::Status CheckIncomingGradient(const ShapeContext& ctx, const TensorType& dy,
                                   const TensorType& forward_output,
                                   absl::string_view forward_name) {
  if (dy == forward_output) return absl::OkStatus();
  return ctx.Error(absl::StrCat("dY ", Str(dy), " does not match the ", forward_name,
                                " output ", Str(forward_output)));
}

// Activation gradients from the forward output (ReluGradient(Y, dY), ...) or input
// (GeluGradient(dY, X)): both inputs have one type, which dX takes. `value` is the index of
// the forward value among the inputs.
ShapeFunction Pointwise(int value, const char* value_name) {
  return [value, value_name](const ShapeContext& ctx) -> absl::StatusOr<TypeList> {
    const TensorType& v = ctx.inputs[value];
    const TensorType& dy = ctx.inputs[1 - value];
    MG_RETURN_IF_ERROR(CheckSameType(ctx, value_name, v, "dY", dy));
    return TypeList{v};
  };
}

// FCGradient(X, W, dY) -> dW, db, [dX].
ShapeFunction FcGradient(bool transposed) {
  return [transposed](const ShapeContext& ctx) -> absl::StatusOr<TypeList> {
    const TensorType& x = ctx.inputs[0];
    const TensorType& w = ctx.inputs[1];
    MG_ASSIGN_OR_RETURN(FcShape fc, InferFc(ctx, x, w, transposed));
    MG_RETURN_IF_ERROR(
        CheckIncomingGradient(ctx, ctx.inputs[2], TensorType{x.dtype, fc.y}, "FC"));
    // db has the bias's type, which is not an input here: Caffe2 FC keeps b in W's dtype.
    TypeList out{w, TensorType{w.dtype, {fc.n}}, x};
    out.resize(ctx.num_outputs);
    return out;
  };
}

// LabelCrossEntropyGradient(X, label, dY) -> dX.
absl::StatusOr<TypeList> LabelCrossEntropyGradient(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_ASSIGN_OR_RETURN(int64_t n, CheckLabelCrossEntropy(ctx, x, ctx.inputs[1]));
  MG_RETURN_IF_ERROR(
      CheckIncomingGradient(ctx, ctx.inputs[2], TensorType{x.dtype, {n}}, "LabelCrossEntropy"));
  return TypeList{x};
}

// CrossEntropyGradient(X, label, dY) -> dX.
absl::StatusOr<TypeList> CrossEntropyGradient(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_ASSIGN_OR_RETURN(int64_t n, CheckCrossEntropy(ctx, x, ctx.inputs[1]));
  MG_RETURN_IF_ERROR(
      CheckIncomingGradient(ctx, ctx.inputs[2], TensorType{x.dtype, {n}}, "CrossEntropy"));
  return TypeList{x};
}

// AveragedLossGradient(X, dLoss) and SumElementsGradient(X, dY) -> dX; dLoss is one element.
absl::StatusOr<TypeList> ScalarLossGradient(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, "dLoss", ctx.inputs[1]));
  MG_RETURN_IF_ERROR(CheckOneElement(ctx, "dLoss", ctx.inputs[1]));
  return TypeList{x};
}

// SoftmaxWithLossGradient(X, labels, [weights,] softmax, dLoss) -> dX.
absl::StatusOr<TypeList> SoftmaxWithLossGradient(const ShapeContext& ctx) {
  const size_t n = ctx.inputs.size();
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(
      CheckSoftmaxWithLoss(ctx, x, ctx.inputs[1], n == 5 ? &ctx.inputs[2] : nullptr));
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "logits", x, "softmax", ctx.inputs[n - 2]));
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "logits", x, "dLoss", ctx.inputs[n - 1]));
  MG_RETURN_IF_ERROR(CheckOneElement(ctx, "dLoss", ctx.inputs[n - 1]));
  return TypeList{x};
}

// Caffe2 AddGradient/SubGradient/MulGradient(dC, A, B) and DivGradient(dC, A, B, C)
// -> dA, dB, each the type of its operand (the broadcast dims are summed away).
absl::StatusOr<TypeList> BinaryGradient(const ShapeContext& ctx) {
  const TensorType& dc = ctx.inputs[0];
  const TensorType& a = ctx.inputs[1];
  const TensorType& b = ctx.inputs[2];
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "A", a, "B", b));
  MG_ASSIGN_OR_RETURN(Dims dims, BinaryElementwiseDims(ctx, a, b));
  const TensorType c{a.dtype, std::move(dims)};
  if (dc != c) {
    return ctx.Error(absl::StrCat("dC ", Str(dc), " does not match the output ", Str(c),
                                  " of A ", Str(a), " and B ", Str(b)));
  }
  if (ctx.inputs.size() == 4) MG_RETURN_IF_ERROR(CheckSameType(ctx, "C", ctx.inputs[3], "dC", dc));
  return TypeList{a, b};
}

// SoftmaxCrossEntropyLossGradient(dLoss, scores, labels, [weights]) -> dScores (ours): the
// scores' type; dLoss one element, or one per sample with reduction 'none'.
absl::StatusOr<TypeList> SoftmaxCrossEntropyLossGradient(const ShapeContext& ctx) {
  const TensorType& scores = ctx.inputs[1];
  if (scores.dims.size() < 2) return ctx.Error("scores must be [N, C, d...]");
  return TypeList{scores};
}

// MatMulGradient(dY, A, B) -> dA, dB (ours; Caffe2 builds MatMul gradients from MatMuls).
absl::StatusOr<TypeList> MatMulGradient(const ShapeContext& ctx) {
  const TensorType& a = ctx.inputs[1];
  const TensorType& b = ctx.inputs[2];
  MG_ASSIGN_OR_RETURN(Dims dims, MatMulDims(ctx, a, b));
  MG_RETURN_IF_ERROR(
      CheckIncomingGradient(ctx, ctx.inputs[0], TensorType{a.dtype, std::move(dims)}, "MatMul"));
  return TypeList{a, b};
}

// ConvGradient(X, W, dY) -> dW, db, [dX]; with no_bias=1 -> dW, [dX].
absl::StatusOr<TypeList> ConvGradient(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& w = ctx.inputs[1];
  MG_ASSIGN_OR_RETURN(TensorType y, InferConv(ctx, x, w));
  MG_RETURN_IF_ERROR(CheckIncomingGradient(ctx, ctx.inputs[2], y, "Conv"));
  MG_ASSIGN_OR_RETURN(int64_t no_bias, IntAttr(ctx, "no_bias", 0));
  TypeList out{w};
  if (no_bias == 0) out.push_back(TensorType{w.dtype, {w.dims[0]}});
  out.push_back(x);
  if (ctx.num_outputs > static_cast<int>(out.size()) ||
      ctx.num_outputs < static_cast<int>(out.size()) - 1) {
    return ctx.Error(absl::StrCat("has ", ctx.num_outputs, " outputs; with no_bias=", no_bias,
                                  " it has ", no_bias == 0 ? "dW, db, [dX]" : "dW, [dX]"));
  }
  out.resize(ctx.num_outputs);
  return out;
}

// MaxPoolGradient/AveragePoolGradient(X, Y, dY) -> dX.
absl::StatusOr<TypeList> PoolGradient(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "Y", ctx.inputs[1], "dY", ctx.inputs[2]));
  MG_ASSIGN_OR_RETURN(TensorType y, InferPool(ctx, x));
  if (y != ctx.inputs[1]) {
    return ctx.Error(absl::StrCat("Y ", Str(ctx.inputs[1]), " is not the pooled X ", Str(x),
                                  ", which is ", Str(y)));
  }
  return TypeList{x};
}

// SpatialBNGradient(X, scale, dY, saved_mean, saved_var, [aggregated dscale, dbias])
// -> dX, dscale, dbias.
absl::StatusOr<TypeList> SpatialBNGradient(const ShapeContext& ctx) {
  if (ctx.inputs.size() == 6) return ctx.Error("takes 5 or 7 inputs, got 6");
  const TensorType& x = ctx.inputs[0];
  const TensorType& scale = ctx.inputs[1];
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "X", x, "dY", ctx.inputs[2]));
  MG_ASSIGN_OR_RETURN(int64_t channel_axis, ChannelAxis(ctx, x));
  const TensorType stats{scale.dtype, {x.dims[channel_axis]}};
  static constexpr const char* kNames[] = {"X",         "scale",        "dY",          "saved_mean",
                                           "saved_var", "dscale_sum", "dbias_sum"};
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (i == 2) continue;
    if (ctx.inputs[i] != stats) {
      return ctx.Error(absl::StrCat(kNames[i], " ", Str(ctx.inputs[i]), " must be ",
                                    Str(stats), " (one per channel of X ", Str(x), ")"));
    }
  }
  return TypeList{x, stats, stats};
}

// BatchNormalizationGradient(dY, X, scale, mean, var) -> dX, dscale, dB, [dmean, dvar] (ours,
// in ONNX Runtime's BatchNormalizationGrad order). `training_mode` (default 0) says what mean
// and var are: the batch's saved statistics (training: 3 outputs) or the op's input_mean and
// input_var (inference: 3 outputs, or 5 when the statistics need gradients too). dscale and dB
// have scale's type, dmean and dvar mean's.
absl::StatusOr<TypeList> BatchNormalizationGradient(const ShapeContext& ctx) {
  const TensorType& dy = ctx.inputs[0];
  const TensorType& x = ctx.inputs[1];
  const TensorType& scale = ctx.inputs[2];
  const TensorType& mean = ctx.inputs[3];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "X", x, "dY", dy));
  if (x.dims.size() < 2) return ctx.Error(absl::StrCat("X ", Str(x), " must have rank >= 2"));
  static constexpr const char* kNames[] = {"dY", "X", "scale", "mean", "var"};
  for (size_t i = 2; i < 5; ++i) {
    MG_RETURN_IF_ERROR(CheckFloat(ctx, kNames[i], ctx.inputs[i]));
    if (ctx.inputs[i].dims != Dims{x.dims[1]}) {
      return ctx.Error(absl::StrCat(kNames[i], " ", Str(ctx.inputs[i]), " must be [", x.dims[1],
                                    "] (one entry per channel of X ", Str(x), ")"));
    }
  }
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "mean", mean, "var", ctx.inputs[4]));
  MG_ASSIGN_OR_RETURN(int64_t training_mode, IntAttr(ctx, "training_mode", 0));
  if (ctx.num_outputs == 4 || (training_mode != 0 && ctx.num_outputs != 3)) {
    return ctx.Error(absl::StrCat(
        "has dX, dscale, dB, and in inference mode (training_mode=0) optionally dmean, dvar; "
        "got ", ctx.num_outputs, " outputs with training_mode=", training_mode));
  }
  TypeList out{x, scale, scale, mean, mean};
  out.resize(ctx.num_outputs);
  return out;
}

// Caffe2 LayerNormGradient(dY, Y, mean, std, X, [gamma]) -> dX, [dgamma, dbeta].
absl::StatusOr<TypeList> LayerNormGradient(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[4];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "X", x, "dY", ctx.inputs[0]));
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "X", x, "Y", ctx.inputs[1]));
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(ctx, "axis", 1));
  MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr,
                                                  static_cast<int64_t>(x.dims.size()), "axis"));
  const TensorType stats{x.dtype, StatisticsDims(x.dims, axis, /*keep_rank=*/false)};
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "mean", ctx.inputs[2], "the statistics", stats));
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "std", ctx.inputs[3], "the statistics", stats));
  if (ctx.num_outputs == 1) return TypeList{x};
  if (ctx.num_outputs != 3 || ctx.inputs.size() != 6) {
    return ctx.Error("has dX alone, or dX, dgamma and dbeta with gamma as its 6th input");
  }
  const TensorType& gamma = ctx.inputs[5];
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, "gamma", gamma));
  MG_ASSIGN_OR_RETURN(int64_t inner, Product(ctx, x.dims, axis, x.dims.size()));
  MG_ASSIGN_OR_RETURN(int64_t count, Product(ctx, gamma.dims));
  if (count != inner) {
    return ctx.Error(absl::StrCat("gamma ", Str(gamma), " must hold ", inner, " elements"));
  }
  return TypeList{x, gamma, gamma};
}

// LayerNormalizationGradient(dY, X, Scale, Mean, InvStdDev) -> dX, dScale, [dB] (ours, in
// ONNX Runtime's LayerNormalizationGrad order); dB has Scale's type.
absl::StatusOr<TypeList> LayerNormalizationGradient(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[1];
  const TensorType& scale = ctx.inputs[2];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "X", x, "dY", ctx.inputs[0]));
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, "Scale", scale));
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(ctx, "axis", -1));
  MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr,
                                                  static_cast<int64_t>(x.dims.size()), "axis"));
  const Dims normalized(x.dims.begin() + axis, x.dims.end());
  if (!BroadcastsTo(scale.dims, normalized)) {
    return ctx.Error(absl::StrCat("Scale ", Str(scale), " does not broadcast to the normalised dims ",
                                  DimsToString(normalized), " of X ", Str(x)));
  }
  const Dims stats = StatisticsDims(x.dims, axis, /*keep_rank=*/true);
  for (size_t i = 3; i < 5; ++i) {
    const TensorType& s = ctx.inputs[i];
    const char* name = i == 3 ? "Mean" : "InvStdDev";
    MG_RETURN_IF_ERROR(CheckFloat(ctx, name, s));
    if (s.dims != stats) {
      return ctx.Error(absl::StrCat(name, " ", Str(s), " must have dims ", DimsToString(stats)));
    }
  }
  TypeList out{x, scale, scale};
  out.resize(ctx.num_outputs);
  return out;
}

// Caffe2 DropoutGrad(dY, mask) -> dX.
absl::StatusOr<TypeList> DropoutGrad(const ShapeContext& ctx) {
  const TensorType& dy = ctx.inputs[0];
  const TensorType& mask = ctx.inputs[1];
  if (mask.dims != dy.dims || mask.dtype != DataType::kBool) {
    return ctx.Error(absl::StrCat("mask ", Str(mask), " must be bool with the dims of dY ",
                                  Str(dy)));
  }
  return TypeList{dy};
}

}  // namespace

void AddGradientSchemas(OpSchemaTable& table) {
  AddSchemas(table,
             {"ReluGradient", "SigmoidGradient", "TanhGradient", "SoftmaxGradient",
              "LeakyReluGradient", "EluGradient"},
             {2, 2}, kOne, Pointwise(/*value=*/0, "Y"));
  AddSchemas(table, {"GeluGradient"}, {2, 2}, kOne, Pointwise(/*value=*/1, "X"));
  AddSchemas(table, {"FCGradient"}, {3, 3}, {2, 3}, FcGradient(/*transposed=*/false));
  AddSchemas(table, {"FCTransposedGradient"}, {3, 3}, {2, 3}, FcGradient(/*transposed=*/true));
  AddSchemas(table, {"LabelCrossEntropyGradient"}, {3, 3}, kOne, LabelCrossEntropyGradient);
  AddSchemas(table, {"CrossEntropyGradient"}, {3, 3}, kOne, CrossEntropyGradient);
  AddSchemas(table, {"AveragedLossGradient", "SumElementsGradient"}, {2, 2}, kOne,
             ScalarLossGradient);
  AddSchemas(table, {"SoftmaxWithLossGradient"}, {4, 5}, kOne, SoftmaxWithLossGradient);
  table.SetTypedInput({"LabelCrossEntropyGradient"}, 1, {DataType::kInt32});
  table.SetTypedInput({"SoftmaxWithLossGradient"}, 1, {DataType::kInt32, DataType::kInt64},
                      "label_prob");
  AddSchemas(table, {"AddGradient", "SubGradient", "MulGradient"}, {3, 3}, {2, 2},
             BinaryGradient);
  AddSchemas(table, {"DivGradient"}, {4, 4}, {2, 2}, BinaryGradient);
  AddSchemas(table, {"MatMulGradient"}, {3, 3}, {2, 2}, MatMulGradient);
  AddSchemas(table, {"SoftmaxCrossEntropyLossGradient"}, {3, 4}, kOne,
             SoftmaxCrossEntropyLossGradient);
  AddSchemas(table, {"ConvGradient", "Conv1DGradient", "Conv2DGradient", "Conv3DGradient"},
             {3, 3}, {1, 3}, ConvGradient);
  AddSchemas(table,
             {"MaxPoolGradient", "AveragePoolGradient", "MaxPool1DGradient",
              "MaxPool2DGradient", "MaxPool3DGradient", "AveragePool1DGradient",
              "AveragePool2DGradient", "AveragePool3DGradient"},
             {3, 3}, kOne, PoolGradient);
  AddSchemas(table, {"SpatialBNGradient"}, {5, 7}, {3, 3}, SpatialBNGradient);
  AddSchemas(table, {"BatchNormalizationGradient"}, {5, 5}, {3, 5}, BatchNormalizationGradient);
  AddSchemas(table, {"LayerNormGradient"}, {5, 6}, {1, 3}, LayerNormGradient);
  AddSchemas(table, {"LayerNormalizationGradient"}, {5, 5}, {2, 3}, LayerNormalizationGradient);
  AddSchemas(table, {"DropoutGrad"}, {2, 2}, kOne, DropoutGrad);
}

}  // namespace memonger::graph
