// Our attention ops (docs/ops.md, "Attention ops"): the pieces of a long-sequence attention
// block that no ONNX op expresses with the right memory behaviour.
//   AlibiBias(coords) -> bias               the 2-D ALiBi bias, built once, rows optionally padded
//   AddAttentionBias(S, bias) -> S          S += bias[..., :L]: reads a padded bias in place
//   PadLastDim(X) -> Y                      a zero-padded copy with the last dim rounded up
//   EfficientAttention(q, k, v, [bias]) -> O, workspace, [lse]   fused, O(L d) extra memory
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/dtype.h"
#include "graph/op_schema.h"
#include "graph/schema_util.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

using schema_internal::AddSchemas;
using schema_internal::Arity;
using schema_internal::CheckDtypeIn;
using schema_internal::CheckFloat;
using schema_internal::CheckRank;
using schema_internal::CheckSameDtype;
using schema_internal::Dims;
using schema_internal::DtypeAttr;
using schema_internal::DtypeNumbering;
using schema_internal::IntAttr;
using schema_internal::Str;
using schema_internal::TypeList;

int64_t RoundUp(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// The padded row length: L itself for pad 0, else L rounded up to a multiple of pad.
absl::StatusOr<int64_t> PaddedLength(const ShapeContext& ctx, int64_t length, int64_t pad) {
  if (pad < 0) return ctx.Error(absl::StrCat("pad ", pad, " is negative"));
  return pad == 0 ? length : RoundUp(length, pad);
}

// AlibiBias(coords [N, 2]) -> bias [1, heads, L, Lp], L = N + cls; attributes heads, cls
// (default 1), pad (default 0), dtype (the bias's element type, default float32).
absl::StatusOr<TypeList> AlibiBias(const ShapeContext& ctx) {
  const TensorType& coords = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckRank(ctx, "coords", coords, 2, 2));
  if (coords.dims[1] != 2) {
    return ctx.Error(absl::StrCat("coords ", Str(coords), " must be [N, 2] (x, y per patch)"));
  }
  MG_RETURN_IF_ERROR(
      CheckDtypeIn(ctx, "coords", coords, {DataType::kInt64, DataType::kFloat32}));
  MG_ASSIGN_OR_RETURN(int64_t heads, IntAttr(ctx, "heads", 0));
  if (heads < 1) return ctx.Error(absl::StrCat("heads ", heads, " must be at least 1"));
  MG_ASSIGN_OR_RETURN(int64_t cls, IntAttr(ctx, "cls", 1));
  if (cls < 0) return ctx.Error(absl::StrCat("cls ", cls, " is negative"));
  MG_ASSIGN_OR_RETURN(int64_t pad, IntAttr(ctx, "pad", 0));
  const int64_t length = coords.dims[0] + cls;
  MG_ASSIGN_OR_RETURN(int64_t padded, PaddedLength(ctx, length, pad));
  MG_ASSIGN_OR_RETURN(std::optional<DataType> dtype,
                      DtypeAttr(ctx, "dtype", DtypeNumbering::kOnnx));
  const DataType out = dtype.value_or(DataType::kFloat32);
  if (!IsFloatingPoint(out)) {
    return ctx.Error(absl::StrCat("dtype ", DataTypeName(out), " is not a floating-point type"));
  }
  return TypeList{TensorType{out, {1, heads, length, padded}}};
}

// A bias [1 or B, H, L, Lp >= L] for scores [B, H, L, L]: same dtype.
absl::Status CheckBias(const ShapeContext& ctx, const TensorType& scores, const TensorType& bias) {
  MG_RETURN_IF_ERROR(CheckRank(ctx, "bias", bias, 4, 4));
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "scores", scores, "bias", bias));
  const Dims& s = scores.dims;
  const Dims& b = bias.dims;
  if ((b[0] != 1 && b[0] != s[0]) || b[1] != s[1] || b[2] != s[2] || b[3] < s[3]) {
    return ctx.Error(absl::StrCat("bias ", Str(bias), " does not fit scores ", Str(scores),
                                  ": want [1 or ", s[0], ", ", s[1], ", ", s[2], ", >= ", s[3],
                                  "]"));
  }
  return absl::OkStatus();
}

// AddAttentionBias(S [B, H, L, L], bias [1 or B, H, L, Lp]) -> S': the first L entries of each
// bias row added; S' has S's type (and may overwrite S in place).
absl::StatusOr<TypeList> AddAttentionBias(const ShapeContext& ctx) {
  const TensorType& scores = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "S", scores));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "S", scores, 4, 4));
  if (scores.dims[2] != scores.dims[3]) {
    return ctx.Error(absl::StrCat("S ", Str(scores), " is not [B, H, L, L]"));
  }
  MG_RETURN_IF_ERROR(CheckBias(ctx, scores, ctx.inputs[1]));
  return TypeList{scores};
}

// PadLastDim(X) -> Y: X's last dim rounded up to a multiple of `multiple` (>= 1), zeros after.
absl::StatusOr<TypeList> PadLastDim(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 1, -1));
  MG_ASSIGN_OR_RETURN(int64_t multiple, IntAttr(ctx, "multiple", 0));
  if (multiple < 1) return ctx.Error(absl::StrCat("multiple ", multiple, " must be at least 1"));
  TensorType y = x;
  y.dims.back() = RoundUp(x.dims.back(), multiple);
  return TypeList{y};
}

// EfficientAttention(q, k, v [B, H, L, d], [bias]) -> O [B, L, H * d], workspace float32
// [L, d + 2], [lse float32 [B, H, L]].
absl::StatusOr<TypeList> EfficientAttention(const ShapeContext& ctx) {
  const TensorType& q = ctx.inputs[0];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "q", q));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "q", q, 4, 4));
  for (int i = 1; i <= 2; ++i) {
    const char* name = i == 1 ? "k" : "v";
    if (ctx.inputs[i] != q) {
      return ctx.Error(absl::StrCat(name, " ", Str(ctx.inputs[i]), " differs from q ", Str(q)));
    }
  }
  const int64_t batch = q.dims[0], heads = q.dims[1], length = q.dims[2], head_dim = q.dims[3];
  if (ctx.inputs.size() == 4) {
    MG_RETURN_IF_ERROR(
        CheckBias(ctx, TensorType{q.dtype, {batch, heads, length, length}}, ctx.inputs[3]));
  }
  TypeList out{TensorType{q.dtype, {batch, length, heads * head_dim}},
               TensorType{DataType::kFloat32, {length, head_dim + 2}},
               TensorType{DataType::kFloat32, {batch, heads, length}}};
  out.resize(ctx.num_outputs);
  return out;
}

// EfficientAttentionGradient(dO, q, k, v, O, lse, [bias]) -> dq, dk, dv, workspace float32
// [L, 3d + 1] (one head's fp32 dq, dk, dv accumulators and the row dot products dO . O).
absl::StatusOr<TypeList> EfficientAttentionGradient(const ShapeContext& ctx) {
  const TensorType& q = ctx.inputs[1];
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "q", q));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "q", q, 4, 4));
  for (int i = 2; i <= 3; ++i) {
    if (ctx.inputs[i] != q) {
      return ctx.Error(absl::StrCat(i == 2 ? "k " : "v ", Str(ctx.inputs[i]), " differs from q ",
                                    Str(q)));
    }
  }
  const int64_t batch = q.dims[0], heads = q.dims[1], length = q.dims[2], head_dim = q.dims[3];
  const TensorType o{q.dtype, {batch, length, heads * head_dim}};
  if (ctx.inputs[0] != o || ctx.inputs[4] != o) {
    return ctx.Error(absl::StrCat("dO ", Str(ctx.inputs[0]), " and O ", Str(ctx.inputs[4]),
                                  " must be ", Str(o)));
  }
  const TensorType lse{DataType::kFloat32, {batch, heads, length}};
  if (ctx.inputs[5] != lse) {
    return ctx.Error(absl::StrCat("lse ", Str(ctx.inputs[5]), " must be ", Str(lse)));
  }
  if (ctx.inputs.size() == 7) {
    MG_RETURN_IF_ERROR(
        CheckBias(ctx, TensorType{q.dtype, {batch, heads, length, length}}, ctx.inputs[6]));
  }
  return TypeList{q, q, q, TensorType{DataType::kFloat32, {length, 3 * head_dim + 1}}};
}

}  // namespace

void AddAttentionSchemas(OpSchemaTable& table) {
  constexpr Arity kOne{1, 1};
  AddSchemas(table, {"AlibiBias"}, kOne, kOne, AlibiBias);
  AddSchemas(table, {"AddAttentionBias"}, {2, 2}, kOne, AddAttentionBias);
  AddSchemas(table, {"PadLastDim"}, kOne, kOne, PadLastDim);
  AddSchemas(table, {"EfficientAttention"}, {3, 4}, {2, 3}, EfficientAttention);
  AddSchemas(table, {"EfficientAttentionGradient"}, {6, 7}, {4, 4}, EfficientAttentionGradient);
}

}  // namespace memonger::graph
