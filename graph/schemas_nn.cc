// Neural-network layers: FC/MatMul/Gemm, Softmax, normalisation (LayerNormalization, LayerNorm,
// SpatialBN, BatchNormalization), convolution and pooling, Dropout.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/batch_normalization_mode.h"
#include "graph/op_schema.h"
#include "graph/schema_util.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

using schema_internal::AddSchemas;
using schema_internal::Arity;
using schema_internal::BroadcastsTo;
using schema_internal::ChannelAxis;
using schema_internal::CheckFloat;
using schema_internal::CheckRank;
using schema_internal::CheckSameDtype;
using schema_internal::Dims;
using schema_internal::FcShape;
using schema_internal::InferConv;
using schema_internal::InferFc;
using schema_internal::InferPool;
using schema_internal::IntAttr;
using schema_internal::MatMulDims;
using schema_internal::NormalizeAxis;
using schema_internal::OptionalIntAttr;
using schema_internal::Product;
using schema_internal::StatisticsDims;
using schema_internal::Str;
using schema_internal::TypeList;

constexpr Arity kOne{1, 1};

int64_t Rank(const TensorType& t) { return static_cast<int64_t>(t.dims.size()); }

// Checks a per-channel parameter: 1-D with `channels` entries.
absl::Status CheckChannelVector(const ShapeContext& ctx, absl::string_view name,
                                const TensorType& t, int64_t channels) {
  if (t.dims.size() != 1 || t.dims[0] != channels) {
    return ctx.Error(absl::StrCat(name, " ", Str(t), " must be [", channels,
                                  "] (one entry per channel)"));
  }
  return absl::OkStatus();
}

// Caffe2 FC(X, W, b) and FCTransposed: Y = X.dims[:axis] + [N]; b is [N].
ShapeFunction Fc(bool transposed) {
  return [transposed](const ShapeContext& ctx) -> absl::StatusOr<TypeList> {
    const TensorType& x = ctx.inputs[0];
    const TensorType& w = ctx.inputs[1];
    const TensorType& b = ctx.inputs[2];
    MG_ASSIGN_OR_RETURN(FcShape fc, InferFc(ctx, x, w, transposed));
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, "b", b));
    if (b.dims.size() != 1 || b.dims[0] != fc.n) {
      return ctx.Error(absl::StrCat("b ", Str(b), " must be [", fc.n, "] to match W ", Str(w)));
    }
    return TypeList{TensorType{x.dtype, std::move(fc.y)}};
  };
}

// ONNX MatMul, Caffe2 BatchMatMul (trans_a/trans_b) and Caffe2 MatMul (which first flattens A
// at axis_a and B at axis_b into matrices when those attributes are given).
absl::StatusOr<TypeList> MatMul(const ShapeContext& ctx) {
  TensorType a = ctx.inputs[0];
  TensorType b = ctx.inputs[1];
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> axis_a, OptionalIntAttr(ctx, "axis_a"));
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> axis_b, OptionalIntAttr(ctx, "axis_b"));
  if (axis_a.has_value() || axis_b.has_value()) {
    auto flatten = [&ctx](TensorType& t, int64_t axis_attr,
                          absl::string_view name) -> absl::Status {
      MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, Rank(t), name));
      MG_ASSIGN_OR_RETURN(int64_t rows, Product(ctx, t.dims, 0, axis));
      MG_ASSIGN_OR_RETURN(int64_t cols, Product(ctx, t.dims, axis, t.dims.size()));
      t.dims = {rows, cols};
      return absl::OkStatus();
    };
    MG_RETURN_IF_ERROR(flatten(a, axis_a.value_or(1), "axis_a"));
    MG_RETURN_IF_ERROR(flatten(b, axis_b.value_or(1), "axis_b"));
  }
  MG_ASSIGN_OR_RETURN(Dims dims, MatMulDims(ctx, a, b));
  return TypeList{TensorType{a.dtype, std::move(dims)}};
}

// ONNX Gemm(A, B, [C]): op(A) [M, K] x op(B) [K, N] + C, C broadcast to [M, N].
absl::StatusOr<TypeList> Gemm(const ShapeContext& ctx) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  MG_RETURN_IF_ERROR(CheckRank(ctx, "A", a, 2, 2));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "B", b, 2, 2));
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "A", a, "B", b));
  MG_ASSIGN_OR_RETURN(int64_t trans_a, IntAttr(ctx, "transA", 0));
  MG_ASSIGN_OR_RETURN(int64_t trans_b, IntAttr(ctx, "transB", 0));
  const int64_t m = trans_a != 0 ? a.dims[1] : a.dims[0];
  const int64_t k_a = trans_a != 0 ? a.dims[0] : a.dims[1];
  const int64_t k_b = trans_b != 0 ? b.dims[1] : b.dims[0];
  const int64_t n = trans_b != 0 ? b.dims[0] : b.dims[1];
  if (k_a != k_b) {
    return ctx.Error(absl::StrCat("inner dimensions differ: A ", Str(a),
                                  trans_a != 0 ? " (transposed)" : "", " has K=", k_a, " but B ",
                                  Str(b), trans_b != 0 ? " (transposed)" : "", " has K=", k_b));
  }
  if (ctx.inputs.size() == 3) {
    const TensorType& c = ctx.inputs[2];
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "A", a, "C", c));
    if (!BroadcastsTo(c.dims, {m, n})) {
      return ctx.Error(absl::StrCat("C ", Str(c), " does not broadcast to [", m, ",", n, "]"));
    }
  }
  return TypeList{TensorType{a.dtype, {m, n}}};
}

// Softmax/LogSoftmax: same type; an explicit axis must exist (Caffe2 default 1, ONNX -1).
absl::StatusOr<TypeList> Softmax(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 1, -1));
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> axis, OptionalIntAttr(ctx, "axis"));
  if (axis.has_value()) MG_RETURN_IF_ERROR(NormalizeAxis(ctx, *axis, Rank(x), "axis").status());
  return TypeList{x};
}

// ONNX LayerNormalization(X, Scale, [B]) -> Y, [Mean], [InvStdDev]: normalises over axes >=
// axis (default -1); Mean and InvStdDev keep X's rank with ones there, in stash_type (float32).
absl::StatusOr<TypeList> LayerNormalization(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 1, -1));
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(ctx, "axis", -1));
  MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, Rank(x), "axis"));
  const Dims normalized(x.dims.begin() + axis, x.dims.end());
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const TensorType& p = ctx.inputs[i];
    const char* name = i == 1 ? "Scale" : "B";
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, name, p));
    if (!BroadcastsTo(p.dims, normalized)) {
      return ctx.Error(absl::StrCat(name, " ", Str(p), " does not broadcast to the normalised dims ",
                                    DimsToString(normalized), " of X ", Str(x)));
    }
  }
  MG_ASSIGN_OR_RETURN(int64_t stash_type, IntAttr(ctx, "stash_type", 1));
  absl::StatusOr<DataType> stash = DataTypeFromProtoNumber(static_cast<int>(stash_type));
  if (!stash.ok() || !IsFloatingPoint(*stash)) {
    return ctx.Error(absl::StrCat("stash_type ", stash_type, " is not a floating-point type"));
  }
  const TensorType stats{*stash, StatisticsDims(x.dims, axis, /*keep_rank=*/true)};
  TypeList out{x, stats, stats};
  out.resize(ctx.num_outputs);
  return out;
}

// Caffe2 LayerNorm(X, [gamma, beta]) -> Y, mean, std; axis default 1; mean/std are
// X.dims[:axis] + [1] in X's dtype; gamma/beta hold prod(X.dims[axis:]) elements.
absl::StatusOr<TypeList> Caffe2LayerNorm(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  if (ctx.inputs.size() == 2) return ctx.Error("takes X alone or X, gamma and beta");
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(ctx, "axis", 1));
  MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, Rank(x), "axis"));
  MG_ASSIGN_OR_RETURN(int64_t inner, Product(ctx, x.dims, axis, x.dims.size()));
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const TensorType& p = ctx.inputs[i];
    const char* name = i == 1 ? "gamma" : "beta";
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, name, p));
    MG_ASSIGN_OR_RETURN(int64_t count, Product(ctx, p.dims));
    if (count != inner) {
      return ctx.Error(absl::StrCat(name, " ", Str(p), " must hold ", inner,
                                    " elements (X.dims[", axis, ":] of X ", Str(x), ")"));
    }
  }
  const TensorType stats{x.dtype, StatisticsDims(x.dims, axis, /*keep_rank=*/false)};
  return TypeList{x, stats, stats};
}

// Conv(X, W, [b]) for Caffe2 and ONNX; b is [M].
absl::StatusOr<TypeList> Conv(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& w = ctx.inputs[1];
  MG_ASSIGN_OR_RETURN(TensorType y, InferConv(ctx, x, w));
  if (ctx.inputs.size() == 3) {
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, "b", ctx.inputs[2]));
    MG_RETURN_IF_ERROR(CheckChannelVector(ctx, "b", ctx.inputs[2], w.dims[0]));
  }
  return TypeList{y};
}

// MaxPool/AveragePool; ONNX MaxPool's optional second output holds int64 indices.
absl::StatusOr<TypeList> Pool(const ShapeContext& ctx) {
  MG_ASSIGN_OR_RETURN(TensorType y, InferPool(ctx, ctx.inputs[0]));
  TypeList out{y};
  if (ctx.num_outputs == 2) out.push_back(TensorType{DataType::kInt64, y.dims});
  return out;
}

// GlobalAveragePool/GlobalMaxPool (ONNX, NCHW): [N, C, 1, ...].
absl::StatusOr<TypeList> GlobalPool(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 3, -1));
  TensorType y = x;
  for (size_t i = 2; i < y.dims.size(); ++i) y.dims[i] = 1;
  return TypeList{y};
}

// Caffe2 SpatialBN(X, scale, bias, mean, var, [sums, sumsq]): test mode (is_test=1) -> Y;
// training -> Y, running_mean, running_var, saved_mean, saved_var, each [C].
absl::StatusOr<TypeList> SpatialBN(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  if (ctx.inputs.size() == 6) return ctx.Error("takes 5 or 7 inputs, got 6");
  MG_ASSIGN_OR_RETURN(int64_t channel_axis, ChannelAxis(ctx, x));
  const int64_t channels = x.dims[channel_axis];
  static constexpr const char* kNames[] = {"X", "scale", "bias", "mean", "var", "sums", "sumsq"};
  const TensorType& scale = ctx.inputs[1];
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    MG_RETURN_IF_ERROR(CheckChannelVector(ctx, kNames[i], ctx.inputs[i], channels));
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "scale", scale, kNames[i], ctx.inputs[i]));
  }
  MG_ASSIGN_OR_RETURN(int64_t is_test, IntAttr(ctx, "is_test", 0));
  if (is_test != 0 && ctx.num_outputs != 1) {
    return ctx.Error(absl::StrCat("in test mode (is_test=1) it has 1 output (Y), got ",
                                  ctx.num_outputs));
  }
  if (is_test == 0 && ctx.num_outputs != 5) {
    return ctx.Error(absl::StrCat(
        "in training mode (is_test=0, the default) it has 5 outputs (Y, running_mean, "
        "running_var, saved_mean, saved_var), got ",
        ctx.num_outputs, "; set is_test=1 for inference"));
  }
  const TensorType stats{scale.dtype, {channels}};
  TypeList out{x, stats, stats, stats, stats};
  out.resize(ctx.num_outputs);
  return out;
}

// ONNX BatchNormalization(X, scale, B, input_mean, input_var) -> Y, [running_mean,
// running_var] (training_mode), and opset <= 9's [saved_mean, saved_var]; stats are [C]. The
// mode (graph/batch_normalization_mode.h) must allow the outputs: inference has Y alone.
absl::StatusOr<TypeList> BatchNormalization(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 2, -1));
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> training_mode,
                      OptionalIntAttr(ctx, "training_mode"));
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> is_test, OptionalIntAttr(ctx, "is_test"));
  if (absl::StatusOr<bool> training =
          BatchNormalizationTrains(training_mode, is_test, ctx.num_outputs);
      !training.ok()) {
    return ctx.Error(training.status().message());
  }
  const int64_t channels = x.dims[1];
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    MG_RETURN_IF_ERROR(CheckChannelVector(ctx, kNames[i], ctx.inputs[i], channels));
  }
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "scale", ctx.inputs[1], "B", ctx.inputs[2]));
  MG_RETURN_IF_ERROR(
      CheckSameDtype(ctx, "input_mean", ctx.inputs[3], "input_var", ctx.inputs[4]));
  const TensorType stats{ctx.inputs[3].dtype, {channels}};
  TypeList out{x, stats, stats, stats, stats};
  out.resize(ctx.num_outputs);
  return out;
}

// Dropout: ONNX (data, [ratio], [training_mode]) and Caffe2 (X) -> Y, [mask bool].
absl::StatusOr<TypeList> Dropout(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  TypeList out{x, TensorType{DataType::kBool, x.dims}};
  out.resize(ctx.num_outputs);
  return out;
}

}  // namespace

void AddNnSchemas(OpSchemaTable& table) {
  AddSchemas(table, {"FC"}, {3, 3}, kOne, Fc(/*transposed=*/false));
  AddSchemas(table, {"FCTransposed"}, {3, 3}, kOne, Fc(/*transposed=*/true));
  AddSchemas(table, {"MatMul", "BatchMatMul"}, {2, 2}, kOne, MatMul);
  AddSchemas(table, {"Gemm"}, {2, 3}, kOne, Gemm);
  AddSchemas(table, {"Softmax", "LogSoftmax"}, kOne, kOne, Softmax);
  AddSchemas(table, {"LayerNormalization"}, {2, 3}, {1, 3}, LayerNormalization);
  AddSchemas(table, {"LayerNorm"}, {1, 3}, {3, 3}, Caffe2LayerNorm);
  AddSchemas(table, {"Conv", "Conv1D", "Conv2D", "Conv3D"}, {2, 3}, kOne, Conv);
  AddSchemas(table, {"MaxPool"}, kOne, {1, 2}, Pool);
  AddSchemas(table,
             {"AveragePool", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AveragePool1D",
              "AveragePool2D", "AveragePool3D"},
             kOne, kOne, Pool);
  AddSchemas(table, {"GlobalAveragePool", "GlobalMaxPool"}, kOne, kOne, GlobalPool);
  AddSchemas(table, {"SpatialBN"}, {5, 7}, {1, 5}, SpatialBN);
  AddSchemas(table, {"BatchNormalization"}, {5, 5}, {1, 5}, BatchNormalization);
  AddSchemas(table, {"Dropout"}, {1, 3}, {1, 2}, Dropout, /*view_capable=*/true);
}

}  // namespace memonger::graph
