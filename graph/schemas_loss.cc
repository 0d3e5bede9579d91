// Losses: Caffe2's LabelCrossEntropy, CrossEntropy, AveragedLoss, SumElements,
// SoftmaxWithLoss and SquaredL2Distance, and ONNX's SoftmaxCrossEntropyLoss.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "graph/op_schema.h"
#include "graph/schema_util.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

using schema_internal::AddSchemas;
using schema_internal::Arity;
using schema_internal::CheckCrossEntropy;
using schema_internal::CheckDtypeIn;
using schema_internal::CheckFloat;
using schema_internal::CheckLabelCrossEntropy;
using schema_internal::CheckRank;
using schema_internal::CheckSameType;
using schema_internal::CheckSoftmaxWithLoss;
using schema_internal::Dims;
using schema_internal::Str;
using schema_internal::StringAttr;
using schema_internal::TypeList;

constexpr Arity kOne{1, 1};

// LabelCrossEntropy(X [N, D], label [N] int32) -> Y [N].
absl::StatusOr<TypeList> LabelCrossEntropy(const ShapeContext& ctx) {
  MG_ASSIGN_OR_RETURN(int64_t n, CheckLabelCrossEntropy(ctx, ctx.inputs[0], ctx.inputs[1]));
  return TypeList{TensorType{ctx.inputs[0].dtype, {n}}};
}

// CrossEntropy(X [N, D], label [N, D]) -> Y [N].
absl::StatusOr<TypeList> CrossEntropy(const ShapeContext& ctx) {
  MG_ASSIGN_OR_RETURN(int64_t n, CheckCrossEntropy(ctx, ctx.inputs[0], ctx.inputs[1]));
  return TypeList{TensorType{ctx.inputs[0].dtype, {n}}};
}

// AveragedLoss(X) -> scalar (the mean of every element).
absl::StatusOr<TypeList> AveragedLoss(const ShapeContext& ctx) {
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", ctx.inputs[0]));
  return TypeList{TensorType{ctx.inputs[0].dtype, {}}};
}

// SumElements(X) -> scalar.
absl::StatusOr<TypeList> SumElements(const ShapeContext& ctx) {
  return TypeList{TensorType{ctx.inputs[0].dtype, {}}};
}

// SoftmaxWithLoss(logits, labels, [weights]) -> softmax (logits' type), loss (scalar).
absl::StatusOr<TypeList> SoftmaxWithLoss(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckSoftmaxWithLoss(ctx, x, ctx.inputs[1],
                                          ctx.inputs.size() == 3 ? &ctx.inputs[2] : nullptr));
  return TypeList{x, TensorType{x.dtype, {}}};
}

// SquaredL2Distance(X, Y) -> [N]: one distance per row of X.
absl::StatusOr<TypeList> SquaredL2Distance(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "X", x, "Y", ctx.inputs[1]));
  return TypeList{TensorType{x.dtype, {x.dims.empty() ? 1 : x.dims[0]}}};
}

// ONNX SoftmaxCrossEntropyLoss(scores [N, C, d...], labels [N, d...], [weights [C]]) -> loss
// (scalar, or [N, d...] with reduction='none'), [log_prob (scores' type)].
absl::StatusOr<TypeList> SoftmaxCrossEntropyLoss(const ShapeContext& ctx) {
  const TensorType& scores = ctx.inputs[0];
  const TensorType& labels = ctx.inputs[1];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "scores", scores));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "scores", scores, 2, -1));
  MG_RETURN_IF_ERROR(
      CheckDtypeIn(ctx, "labels", labels, {DataType::kInt32, DataType::kInt64}));
  Dims expected{scores.dims[0]};
  expected.insert(expected.end(), scores.dims.begin() + 2, scores.dims.end());
  if (labels.dims != expected) {
    return ctx.Error(absl::StrCat("labels ", Str(labels), " must be ", DimsToString(expected),
                                  " for scores ", Str(scores)));
  }
  if (ctx.inputs.size() == 3) {
    const TensorType& weights = ctx.inputs[2];
    if (weights.dims != Dims{scores.dims[1]} || weights.dtype != scores.dtype) {
      return ctx.Error(absl::StrCat("weights ", Str(weights), " must be ",
                                    DataTypeName(scores.dtype), "[", scores.dims[1],
                                    "] (one per class)"));
    }
  }
  MG_ASSIGN_OR_RETURN(std::optional<std::string> reduction, StringAttr(ctx, "reduction"));
  const std::string mode = absl::AsciiStrToLower(reduction.value_or("mean"));
  TensorType loss{scores.dtype, {}};
  if (mode == "none") {
    loss.dims = expected;
  } else if (mode != "mean" && mode != "sum") {
    return ctx.Error(absl::StrCat("reduction '", *reduction, "' must be none, sum or mean"));
  }
  TypeList out{loss, scores};
  out.resize(ctx.num_outputs);
  return out;
}

}  // namespace

void AddLossSchemas(OpSchemaTable& table) {
  AddSchemas(table, {"LabelCrossEntropy"}, {2, 2}, kOne, LabelCrossEntropy);
  AddSchemas(table, {"CrossEntropy"}, {2, 2}, kOne, CrossEntropy);
  AddSchemas(table, {"AveragedLoss"}, kOne, kOne, AveragedLoss);
  AddSchemas(table, {"SumElements"}, kOne, kOne, SumElements);
  AddSchemas(table, {"SoftmaxWithLoss"}, {2, 3}, {2, 2}, SoftmaxWithLoss);
  AddSchemas(table, {"SquaredL2Distance"}, {2, 2}, kOne, SquaredL2Distance);
  AddSchemas(table, {"SoftmaxCrossEntropyLoss"}, {2, 3}, {1, 2}, SoftmaxCrossEntropyLoss);
  // Labels: Caffe2's are int32 (float probabilities with label_prob=1), ONNX's int64.
  table.SetTypedInput({"LabelCrossEntropy"}, 1, {DataType::kInt32});
  table.SetTypedInput({"SoftmaxWithLoss"}, 1, {DataType::kInt32, DataType::kInt64}, "label_prob");
  table.SetTypedInput({"SoftmaxCrossEntropyLoss"}, 1, {DataType::kInt64, DataType::kInt32});
}

}  // namespace memonger::graph
